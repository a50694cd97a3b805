// Tensor: shapes, views sharing memory, reshape errors, conversions.
#include "core/tensor.h"

#include <gtest/gtest.h>

#include "core/half.h"

namespace sparkserve::core {
namespace {

TEST(Tensor, EmptyHasShapeAndBytes) {
  Tensor t = Tensor::Zeros({2, 3}, DType::kBF16);
  EXPECT_EQ(t.numel(), 6);
  EXPECT_EQ(t.nbytes(), 12u);
  EXPECT_EQ(t.ToString(), "bf16[2, 3] cpu");
  EXPECT_EQ(reinterpret_cast<uintptr_t>(t.raw_data()) % 64, 0u);
}

TEST(Tensor, SliceAndReshapeShareMemory) {
  std::vector<float> v(12);
  for (int i = 0; i < 12; ++i) v[i] = static_cast<float>(i);
  Tensor t = Tensor::FromF32({4, 3}, v);
  Tensor rows = t.Slice(1, 3);
  EXPECT_EQ(rows.shape(), (Shape{2, 3}));
  EXPECT_EQ(rows.data<float>()[0], 3.0f);
  rows.data<float>()[0] = 100.0f;
  EXPECT_EQ(t.data<float>()[3], 100.0f);
  auto r = t.Reshape({-1, 6});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->shape(), (Shape{2, 6}));
  EXPECT_FALSE(t.Reshape({5, -1}).ok());
  EXPECT_FALSE(t.Reshape({-1, -1}).ok());
}

TEST(Tensor, BorrowKeepsOwnerAlive) {
  auto owner = std::make_shared<std::vector<float>>(4, 2.5f);
  std::weak_ptr<std::vector<float>> weak = owner;
  Tensor t = Tensor::Borrow(owner->data(), {4}, DType::kF32, Device::Cpu(), owner);
  owner.reset();
  EXPECT_FALSE(weak.expired());
  EXPECT_EQ(t.data<float>()[3], 2.5f);
  t = Tensor();
  EXPECT_TRUE(weak.expired());
}

TEST(Tensor, ToF32FromHalfTypes) {
  Tensor b = Tensor::Empty({3}, DType::kBF16);
  b.data<uint16_t>()[0] = F32ToBf16(1.5f);
  b.data<uint16_t>()[1] = F32ToBf16(-2.0f);
  b.data<uint16_t>()[2] = F32ToBf16(0.0f);
  auto f = ToF32(b);
  ASSERT_TRUE(f.ok());
  EXPECT_EQ(f->data<float>()[0], 1.5f);
  EXPECT_EQ(f->data<float>()[1], -2.0f);
  EXPECT_FALSE(ToF32(Tensor::Empty({1}, DType::kI32)).ok());
}

TEST(Device, ParseAndCudaAbsenceIsAClearError) {
  EXPECT_TRUE(ParseDevice("cpu")->is_cpu());
  EXPECT_EQ(ParseDevice("cuda:1")->index, 1);
  EXPECT_FALSE(ParseDevice("tpu").ok());
  // This machine has no GPU: listing devices must fail cleanly, never crash.
  auto devs = ListCudaDevices();
  if (!devs.ok()) {
    EXPECT_FALSE(devs.status().message().empty());
  }
}

TEST(DType, SafetensorsNamesRoundTrip) {
  for (DType t : {DType::kF32, DType::kBF16, DType::kF16, DType::kF8E4M3, DType::kU8, DType::kI32, DType::kI64}) {
    auto back = DTypeFromSafetensorsName(DTypeSafetensorsName(t));
    ASSERT_TRUE(back.ok());
    EXPECT_EQ(*back, t);
  }
  EXPECT_FALSE(DTypeFromSafetensorsName("F64").ok());
}

}  // namespace
}  // namespace sparkserve::core
