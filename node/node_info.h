// What a node reports about itself once a head authenticates: hostname, devices (cpu + visible CUDA GPUs), capabilities.
#pragma once
#include <string>

#include "proto/node.pb.h"

namespace sparkserve::node {

std::string Hostname();

// The cpu (cores, host memory) and every visible CUDA device; capabilities follow from them.
void DescribeThisNode(proto::AuthenticateResponse* out);

}  // namespace sparkserve::node
