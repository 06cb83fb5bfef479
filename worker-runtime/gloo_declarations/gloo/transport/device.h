#pragma once
// Stand-in for Gloo's <gloo/transport/device.h> (README.md in gloo_declarations). ddprun-train
// passes devices that torch made (ProcessGroupGloo::createDeviceForInterface and friends) by
// shared_ptr, and ProcessGroupGloo.hpp holds send and receive buffers by unique_ptr: both only
// need the names.

namespace gloo::transport {

class Device;
class UnboundBuffer;

}  // namespace gloo::transport
