// Packing, verifying and unpacking single-file models (see model_pack.h).
#include "quant/model_pack.h"

#include <fcntl.h>
#include <openssl/evp.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <set>

#include "absl/strings/escaping.h"
#include "core/dtype.h"
#include "core/status.h"
#include "fmt/format.h"
#include "nlohmann/json.hpp"
#include "spdlog/spdlog.h"

namespace sparkserve::quant {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using nlohmann::ordered_json;

constexpr size_t kChunk = 16u << 20;
const std::string kDigestPlaceholder = "sha256:" + std::string(64, '0');

// Incremental SHA-256 (OpenSSL).
class Sha256 {
 public:
  Sha256() : ctx_(EVP_MD_CTX_new(), EVP_MD_CTX_free) { EVP_DigestInit_ex(ctx_.get(), EVP_sha256(), nullptr); }
  void Update(const void* p, size_t n) { EVP_DigestUpdate(ctx_.get(), p, n); }
  std::string HexFinal() {
    unsigned char md[32];
    unsigned int len = 0;
    EVP_DigestFinal_ex(ctx_.get(), md, &len);
    std::string hex;
    for (unsigned i = 0; i < len; ++i) hex += fmt::format("{:02x}", md[i]);
    return hex;
  }

 private:
  std::unique_ptr<EVP_MD_CTX, void (*)(EVP_MD_CTX*)> ctx_;
};

// An open file descriptor, closed on scope exit.
struct Fd {
  int fd = -1;
  ~Fd() { if (fd >= 0) ::close(fd); }
};

absl::Status PreadAll(int fd, void* dst, size_t n, uint64_t offset, const std::string& path) {
  auto* p = static_cast<char*>(dst);
  while (n > 0) {
    const ssize_t r = ::pread(fd, p, n, static_cast<off_t>(offset));
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return absl::DataLossError(fmt::format("{}: read failed at byte {}: {}", path, offset,
                                                       r == 0 ? "unexpected end of file" : std::strerror(errno)));
    p += r, n -= static_cast<size_t>(r), offset += static_cast<uint64_t>(r);
  }
  return absl::OkStatus();
}

absl::Status WriteAll(std::ofstream& out, const void* p, size_t n, const std::string& path) {
  out.write(static_cast<const char*>(p), static_cast<std::streamsize>(n));
  if (!out) return absl::InternalError(fmt::format("{}: write failed", path));
  return absl::OkStatus();
}

// Copies [offset, offset + n) of `fd` to `out`, hashing it into `h` when given.
absl::Status CopyRange(int fd, uint64_t offset, uint64_t n, const std::string& in_path, std::ofstream* out,
                       const std::string& out_path, Sha256* h) {
  std::vector<char> buf(std::min<uint64_t>(n, kChunk));
  while (n > 0) {
    const size_t k = static_cast<size_t>(std::min<uint64_t>(n, kChunk));
    RETURN_IF_ERROR(PreadAll(fd, buf.data(), k, offset, in_path));
    if (h != nullptr) h->Update(buf.data(), k);
    if (out != nullptr) RETURN_IF_ERROR(WriteAll(*out, buf.data(), k, out_path));
    offset += k, n -= k;
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> ReadWholeFile(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  if (!in) return absl::NotFoundError(fmt::format("{}: cannot open", p.string()));
  std::string s((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (in.bad()) return absl::InternalError(fmt::format("{}: read failed", p.string()));
  return s;
}

bool IsUtf8Text(const std::string& s) {
  try {
    (void)json(s).dump();
    return true;
  } catch (const json::exception&) {
    return false;
  }
}

// The directory's safetensors files in data-section order.
absl::StatusOr<std::vector<std::string>> ShardNames(const fs::path& dir) {
  if (fs::exists(dir / "model.safetensors")) return std::vector<std::string>{"model.safetensors"};
  const fs::path index = dir / "model.safetensors.index.json";
  if (!fs::exists(index)) {
    return absl::NotFoundError(fmt::format("{}: no model.safetensors or model.safetensors.index.json", dir.string()));
  }
  ASSIGN_OR_RETURN(std::string text, ReadWholeFile(index));
  std::set<std::string> names;
  try {
    const json index_json = json::parse(text);  // named: a range-for over a temporary's items() dangles
    for (const auto& [tensor, file] : index_json.at("weight_map").items()) names.insert(file.get<std::string>());
  } catch (const json::exception& e) {
    return absl::InvalidArgumentError(fmt::format("{}: {}", index.string(), e.what()));
  }
  if (names.empty()) return absl::InvalidArgumentError(fmt::format("{}: empty weight_map", index.string()));
  return std::vector<std::string>(names.begin(), names.end());
}

// Reads a safetensors prefix (8-byte length + header) of an open file.
absl::StatusOr<std::string> ReadHeaderBytes(int fd, uint64_t file_bytes, const std::string& path) {
  if (file_bytes < 8) return absl::DataLossError(fmt::format("{}: truncated at {} bytes (shorter than the 8-byte header length)", path, file_bytes));
  uint8_t len[8];
  RETURN_IF_ERROR(PreadAll(fd, len, 8, 0, path));
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | len[i];
  if (n > kMaxSafetensorsHeaderBytes) {
    return absl::InvalidArgumentError(fmt::format("{}: header length {} is absurd (limit {}): not a safetensors file?", path, n, kMaxSafetensorsHeaderBytes));
  }
  if (8 + n > file_bytes) {
    return absl::DataLossError(fmt::format("{}: truncated at {} of at least {} bytes (inside the header)", path, file_bytes, 8 + n));
  }
  std::string s(8 + n, '\0');
  RETURN_IF_ERROR(PreadAll(fd, s.data(), s.size(), 0, path));
  return s;
}

absl::StatusOr<uint64_t> FileSize(int fd, const std::string& path) {
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) return absl::InvalidArgumentError(fmt::format("{}: not a regular file", path));
  return static_cast<uint64_t>(st.st_size);
}

absl::StatusOr<int> OpenRead(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return absl::NotFoundError(fmt::format("{}: cannot open: {}", path, std::strerror(errno)));
  return fd;
}

}  // namespace

std::string DigestPreamble(const std::map<std::string, std::string>& metadata,
                           const std::vector<SafetensorsEntry>& tensors) {
  std::string s = "sparkserve.pack.v1\n";
  for (const auto& [k, v] : metadata) {
    if (k == kPackDigestKey) continue;
    s += fmt::format("m {} {}\n{}\n{}\n", k.size(), v.size(), k, v);
  }
  for (const SafetensorsEntry& e : tensors) {
    s += fmt::format("t {}\n{} {} {} {}\n", e.name, core::DTypeSafetensorsName(e.dtype), core::ShapeToString(e.shape),
                     e.begin, e.end);
  }
  return s;
}

absl::Status PackModelDirectory(const std::string& model_dir, const std::string& out_path) {
  const fs::path dir(model_dir);
  if (!fs::is_directory(dir)) return absl::NotFoundError(fmt::format("{}: not a directory", model_dir));
  ASSIGN_OR_RETURN(std::vector<std::string> shard_names, ShardNames(dir));

  // Shards: their header bytes and entries, shifted into one data section.
  struct ShardIn {
    std::string name, header;
    uint64_t data_bytes;
    SafetensorsHeader parsed;
  };
  std::vector<ShardIn> shards;
  std::map<std::string, std::string> metadata;
  std::vector<SafetensorsEntry> entries;
  std::set<std::string> seen;
  uint64_t base = 0;
  for (const std::string& name : shard_names) {
    const std::string path = (dir / name).string();
    ASSIGN_OR_RETURN(SafetensorsFile f, SafetensorsFile::Open(path));
    ASSIGN_OR_RETURN(int fd_raw, OpenRead(path));
    Fd fd{fd_raw};
    ASSIGN_OR_RETURN(uint64_t size, FileSize(fd.fd, path));
    ASSIGN_OR_RETURN(std::string header, ReadHeaderBytes(fd.fd, size, path));
    if (shards.empty()) {
      for (const auto& [k, v] : f.metadata()) {
        if (k.rfind("sparkserve.", 0) != 0) metadata[k] = v;
      }
    }
    for (SafetensorsEntry e : f.header().tensors) {
      if (!seen.insert(e.name).second) {
        return absl::InvalidArgumentError(fmt::format("{}: tensor '{}' is in two shards", model_dir, e.name));
      }
      e.begin += base, e.end += base;
      entries.push_back(std::move(e));
    }
    shards.push_back({name, std::move(header), f.header().data_size, f.header()});
    base += f.header().data_size;
  }

  // Every other file (not hidden, not a shard).
  const std::set<std::string> shard_set(shard_names.begin(), shard_names.end());
  std::error_code ec;
  for (auto it = fs::recursive_directory_iterator(dir, ec); !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
    const fs::path rel = fs::relative(it->path(), dir);
    if (it->path().filename().string().starts_with(".")) {
      spdlog::info("pack: leaving out {} (hidden)", rel.string());
      if (it->is_directory()) it.disable_recursion_pending();
      continue;
    }
    if (!it->is_regular_file()) continue;
    const std::string r = rel.generic_string();
    if (shard_set.count(r)) continue;
    if (it->file_size() > kMaxPackedFileBytes) {
      return absl::InvalidArgumentError(fmt::format("{}: {} bytes, over the {} MiB an embedded file may have",
                                                    it->path().string(), it->file_size(), kMaxPackedFileBytes >> 20));
    }
    ASSIGN_OR_RETURN(std::string contents, ReadWholeFile(it->path()));
    if (IsUtf8Text(contents)) {
      metadata[kPackFilePrefix + r] = std::move(contents);
    } else {
      metadata[kPackFileBase64Prefix + r] = absl::Base64Escape(contents);
    }
  }
  if (ec) return absl::InternalError(fmt::format("{}: listing failed: {}", model_dir, ec.message()));

  json shard_list = json::array();
  for (const ShardIn& s : shards) {
    shard_list.push_back({{"file", s.name}, {"header", absl::Base64Escape(s.header)}, {"data_bytes", s.data_bytes}});
  }
  metadata[kPackVersionKey] = "1";
  metadata[kPackShardsKey] = shard_list.dump();
  metadata[kPackDigestKey] = kDigestPlaceholder;

  ordered_json header = ordered_json::object();
  header["__metadata__"] = ordered_json(metadata);
  for (const SafetensorsEntry& e : entries) {
    header[e.name] = {{"dtype", core::DTypeSafetensorsName(e.dtype)}, {"shape", e.shape}, {"data_offsets", {e.begin, e.end}}};
  }
  std::string text = header.dump();
  while ((8 + text.size()) % 8 != 0) text += ' ';
  if (text.size() > kMaxSafetensorsHeaderBytes) {
    return absl::InvalidArgumentError(fmt::format("{}: the packed header would be {} bytes (limit {})", model_dir, text.size(), kMaxSafetensorsHeaderBytes));
  }
  const std::string needle = fmt::format("\"{}\":\"{}\"", kPackDigestKey, kDigestPlaceholder);
  const size_t at = text.find(needle);
  if (at == std::string::npos) return absl::InternalError("pack: digest placeholder not found");
  const uint64_t digest_offset = 8 + at + needle.size() - 65;  // the 64 hex digits + closing quote

  Sha256 h;
  const std::string preamble = DigestPreamble(metadata, entries);
  h.Update(preamble.data(), preamble.size());
  const std::string tmp = out_path + ".partial";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) return absl::InternalError(fmt::format("{}: cannot create", tmp));
    uint8_t len[8];
    for (int i = 0; i < 8; ++i) len[i] = static_cast<uint8_t>(static_cast<uint64_t>(text.size()) >> (8 * i));
    RETURN_IF_ERROR(WriteAll(out, len, 8, tmp));
    RETURN_IF_ERROR(WriteAll(out, text.data(), text.size(), tmp));
    for (const ShardIn& s : shards) {
      const std::string path = (dir / s.name).string();
      ASSIGN_OR_RETURN(int fd_raw, OpenRead(path));
      Fd fd{fd_raw};
      RETURN_IF_ERROR(CopyRange(fd.fd, s.header.size(), s.data_bytes, path, &out, tmp, &h));
    }
    const std::string hex = h.HexFinal();
    out.seekp(static_cast<std::streamoff>(digest_offset));
    RETURN_IF_ERROR(WriteAll(out, hex.data(), hex.size(), tmp));
    out.close();
    if (!out) return absl::InternalError(fmt::format("{}: write failed", tmp));
    size_t files = 0;
    for (const auto& [k, v] : metadata) files += k.starts_with("sparkserve.file") ? 1 : 0;
    spdlog::info("packed {} ({} tensors, {} files, {} shard(s)) into {}: sha256:{}", model_dir, entries.size(), files,
                 shards.size(), out_path, hex);
  }
  fs::rename(tmp, out_path, ec);
  if (ec) return absl::InternalError(fmt::format("{}: rename failed: {}", out_path, ec.message()));
  return absl::OkStatus();
}

bool LooksLikePackedModel(const std::string& path) {
  absl::StatusOr<int> fd_raw = OpenRead(path);
  if (!fd_raw.ok()) return false;
  Fd fd{*fd_raw};
  absl::StatusOr<uint64_t> size = FileSize(fd.fd, path);
  if (!size.ok()) return false;
  absl::StatusOr<std::string> header = ReadHeaderBytes(fd.fd, *size, path);
  return header.ok() && header->find(fmt::format("\"{}\"", kPackVersionKey)) != std::string::npos;
}

absl::StatusOr<PackedModel> ReadPackedModel(const std::string& path, bool verify_digest) {
  ASSIGN_OR_RETURN(int fd_raw, OpenRead(path));
  Fd fd{fd_raw};
  ASSIGN_OR_RETURN(uint64_t size, FileSize(fd.fd, path));
  ASSIGN_OR_RETURN(std::string prefix, ReadHeaderBytes(fd.fd, size, path));
  // The size the header describes, before the full validation (so truncation reads as such).
  json root;
  try {
    root = json::parse(prefix.substr(8));
  } catch (const json::exception& e) {
    return absl::DataLossError(fmt::format("{}: the header is not valid JSON (damaged file?): {}", path, e.what()));
  }
  if (!root.is_object()) return absl::DataLossError(fmt::format("{}: the header is not a JSON object", path));
  uint64_t data_end = 0;
  for (const auto& [name, info] : root.items()) {
    if (name == "__metadata__") continue;
    try {
      data_end = std::max(data_end, info.at("data_offsets").at(1).get<uint64_t>());
    } catch (const json::exception& e) {
      return absl::DataLossError(fmt::format("{}: tensor '{}': bad data_offsets: {}", path, name, e.what()));
    }
  }
  const uint64_t expected = prefix.size() + data_end;
  if (size < expected) return absl::DataLossError(fmt::format("{}: truncated at {} of {} bytes", path, size, expected));
  if (size > expected) {
    return absl::DataLossError(fmt::format("{}: {} bytes appended after the last tensor (the file has {} bytes, its "
                                           "header describes {})", path, size - expected, size, expected));
  }
  ASSIGN_OR_RETURN(SafetensorsFile f, SafetensorsFile::Open(path));
  const auto& md = f.metadata();
  const auto version = md.find(kPackVersionKey);
  if (version == md.end()) {
    return absl::InvalidArgumentError(fmt::format("{}: a safetensors file without \"{}\" metadata: not a packed model "
                                                  "(pass its directory, or pack it with `sparkserve pack`)", path, kPackVersionKey));
  }
  if (version->second != "1") {
    return absl::InvalidArgumentError(fmt::format("{}: packed layout version {} (this build reads 1)", path, version->second));
  }
  PackedModel p;
  p.path = path;
  p.file_bytes = size;
  const auto digest = md.find(kPackDigestKey);
  if (digest == md.end() || !digest->second.starts_with("sha256:") || digest->second.size() != 71) {
    return absl::DataLossError(fmt::format("{}: no valid \"{}\" in the metadata", path, kPackDigestKey));
  }
  p.digest = digest->second;
  if (verify_digest) {
    const auto t0 = std::chrono::steady_clock::now();
    Sha256 h;
    const std::string preamble = DigestPreamble(md, f.header().tensors);
    h.Update(preamble.data(), preamble.size());
    ::posix_fadvise(fd.fd, 0, 0, POSIX_FADV_SEQUENTIAL);
    RETURN_IF_ERROR(CopyRange(fd.fd, f.header().data_start, f.header().data_size, path, nullptr, "", &h));
    const std::string actual = "sha256:" + h.HexFinal();
    p.verify_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (actual != p.digest) {
      return absl::DataLossError(fmt::format("{}: digest mismatch: the contents hash to {}, the header records {} (the "
                                             "file is damaged or was modified)", path, actual, p.digest));
    }
    spdlog::info("{}: digest verified ({:.1f} GB in {:.2f} s)", path, f.header().data_size / 1e9, p.verify_seconds);
  }
  for (const auto& [k, v] : md) {
    if (k.starts_with(kPackFilePrefix)) {
      p.files[k.substr(std::strlen(kPackFilePrefix))] = v;
    } else if (k.starts_with(kPackFileBase64Prefix)) {
      std::string raw;
      if (!absl::Base64Unescape(v, &raw)) return absl::DataLossError(fmt::format("{}: {}: invalid base64", path, k));
      p.files[k.substr(std::strlen(kPackFileBase64Prefix))] = std::move(raw);
    }
  }
  for (const auto& [rel, contents] : p.files) {
    const fs::path r(rel);
    if (r.is_absolute() || rel.empty() || std::any_of(r.begin(), r.end(), [](const fs::path& c) { return c == ".." || c == "."; })) {
      return absl::InvalidArgumentError(fmt::format("{}: embedded file name '{}' is not a plain relative path", path, rel));
    }
  }
  try {
    uint64_t begin = 0;
    for (const json& s : json::parse(md.at(kPackShardsKey))) {
      PackedModel::Shard shard;
      shard.file = s.at("file").get<std::string>();
      if (!absl::Base64Unescape(s.at("header").get<std::string>(), &shard.header) || shard.header.size() < 8) {
        return absl::DataLossError(fmt::format("{}: shard {}: invalid header bytes", path, shard.file));
      }
      shard.data_begin = begin;
      shard.data_bytes = s.at("data_bytes").get<uint64_t>();
      if (shard.file.find('/') != std::string::npos || shard.file.starts_with(".")) {
        return absl::InvalidArgumentError(fmt::format("{}: shard name '{}' is not a plain file name", path, shard.file));
      }
      begin += shard.data_bytes;
      p.shards.push_back(std::move(shard));
    }
    if (begin != f.header().data_size) {
      return absl::DataLossError(fmt::format("{}: the shard layout covers {} bytes of the {}-byte data section", path, begin, f.header().data_size));
    }
  } catch (const std::exception& e) {
    return absl::DataLossError(fmt::format("{}: invalid \"{}\": {}", path, kPackShardsKey, e.what()));
  }
  return p;
}

absl::Status UnpackModelFile(const std::string& path, const std::string& out_dir) {
  ASSIGN_OR_RETURN(PackedModel p, ReadPackedModel(path));
  std::error_code ec;
  if (fs::exists(out_dir) && !fs::is_empty(out_dir, ec)) {
    return absl::AlreadyExistsError(fmt::format("{}: exists and is not empty", out_dir));
  }
  fs::create_directories(out_dir, ec);
  if (ec) return absl::InternalError(fmt::format("{}: cannot create: {}", out_dir, ec.message()));
  ASSIGN_OR_RETURN(int fd_raw, OpenRead(path));
  Fd fd{fd_raw};
  ASSIGN_OR_RETURN(std::string prefix, ReadHeaderBytes(fd.fd, p.file_bytes, path));
  for (const PackedModel::Shard& s : p.shards) {
    const std::string out_path = (fs::path(out_dir) / s.file).string();
    std::ofstream out(out_path, std::ios::binary | std::ios::trunc);
    if (!out) return absl::InternalError(fmt::format("{}: cannot create", out_path));
    RETURN_IF_ERROR(WriteAll(out, s.header.data(), s.header.size(), out_path));
    RETURN_IF_ERROR(CopyRange(fd.fd, prefix.size() + s.data_begin, s.data_bytes, path, &out, out_path, nullptr));
    out.close();
    if (!out) return absl::InternalError(fmt::format("{}: write failed", out_path));
  }
  for (const auto& [rel, contents] : p.files) {
    const fs::path out_path = fs::path(out_dir) / rel;
    fs::create_directories(out_path.parent_path(), ec);
    std::ofstream out(out_path, std::ios::binary | std::ios::trunc);
    if (!out) return absl::InternalError(fmt::format("{}: cannot create", out_path.string()));
    RETURN_IF_ERROR(WriteAll(out, contents.data(), contents.size(), out_path.string()));
  }
  spdlog::info("unpacked {} into {} ({} shard(s), {} files)", path, out_dir, p.shards.size(), p.files.size());
  return absl::OkStatus();
}

}  // namespace sparkserve::quant
