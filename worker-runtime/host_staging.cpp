#include "host_staging.hpp"

#include <c10/core/StreamGuard.h>
#include <c10/core/impl/VirtualGuardImpl.h>

namespace ddprun::train {
namespace {

bool fits(const torch::Tensor& buffer, const torch::Tensor& source, bool pinned) {
  return buffer.defined() && buffer.sizes() == source.sizes() && buffer.dtype() == source.dtype() &&
         buffer.is_pinned() == pinned;
}

c10::Stream current_stream(const c10::Device& device) {
  return c10::impl::VirtualGuardImpl(device.type()).getStream(device);
}

}  // namespace

void HostStaging::begin() {
  next_buffer_ = 0;
  side_waited_for_compute_ = false;
}

HostStaging::SideStream& HostStaging::side_stream_for(const c10::Device& device) {
  if (!side_ || side_->device != device) {
    const c10::impl::VirtualGuardImpl guard(device.type());
    side_.emplace(SideStream{device, guard.getStreamFromGlobalPool(device),
                             std::make_shared<c10::Event>(device.type())});
  }
  if (!side_waited_for_compute_) {
    // The copies must see the state as the work queued so far leaves it.
    c10::Event computed(device.type());
    computed.record(current_stream(device));
    computed.block(side_->stream);
    side_waited_for_compute_ = true;
  }
  return *side_;
}

torch::Tensor HostStaging::copy(const torch::Tensor& source) {
  const auto value = source.detach();
  const bool on_accelerator = !value.device().is_cpu();
  if (next_buffer_ == buffers_.size()) {
    buffers_.emplace_back();
  }
  auto& buffer = buffers_[next_buffer_++];
  if (!fits(buffer, value, on_accelerator)) {
    buffer = torch::empty(value.sizes(), torch::TensorOptions()
                                             .dtype(value.dtype())
                                             .device(torch::kCPU)
                                             .pinned_memory(on_accelerator));
  }
  if (!on_accelerator) {
    buffer.copy_(value);
    return buffer;
  }
  auto& side = side_stream_for(value.device());
  const c10::StreamGuard on_side(side.stream);
  buffer.copy_(value, /*non_blocking=*/true);
  copies_in_flight_ = true;
  return buffer;
}

std::function<void()> HostStaging::end() {
  if (!side_ || !side_waited_for_compute_) {
    return {};
  }
  side_->copied->record(side_->stream);
  return [copied = side_->copied] { copied->synchronize(); };
}

void HostStaging::before_update() {
  if (copies_in_flight_) {
    side_->copied->block(current_stream(side_->device));
    copies_in_flight_ = false;
  }
}

}  // namespace ddprun::train
