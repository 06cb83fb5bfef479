#pragma once
// Host copies of the training state for a snapshot written beside the training. The copies go
// into buffers kept from one snapshot to the next (the n-th copy of a capture reuses the n-th
// buffer), so a snapshot pays neither an allocation nor its page faults.
//
// On a CPU a copy is a memcpy in the step. On an accelerator the buffers are pinned, and the
// copies are queued on a side stream that first waits for the work queued so far on the compute
// stream: the step pays only for queueing them. The writer's thread waits for them (the function
// end() returns) before it reads the buffers, and the compute stream waits for them (on the device,
// not the host) before the next optimizer step changes the state in place (before_update()).
//
// One capture at a time, and a capture only once the previous snapshot's write is done: the
// SnapshotKeeper guarantees both (snapshot_keeper.hpp), so a buffer is never overwritten while the
// writer reads it.
#include <c10/core/Event.h>
#include <c10/core/Stream.h>
#include <torch/torch.h>

#include <functional>
#include <memory>
#include <optional>
#include <vector>

namespace ddprun::train {

class HostStaging {
 public:
  void begin();
  // A host copy of `source` (detached), valid once end()'s function has returned.
  torch::Tensor copy(const torch::Tensor& source);
  // Ends the capture; the function returned blocks until every copy of it is complete (empty when
  // all were synchronous).
  std::function<void()> end();
  // Before the training changes the copied tensors in place: orders that change after the copies.
  void before_update();

 private:
  struct SideStream {
    c10::Device device;
    c10::Stream stream;
    std::shared_ptr<c10::Event> copied;  // shared with end()'s function, which the writer runs
  };
  SideStream& side_stream_for(const c10::Device& device);

  std::vector<torch::Tensor> buffers_;
  size_t next_buffer_ = 0;
  std::optional<SideStream> side_;
  bool side_waited_for_compute_ = false;  // this capture's side stream follows the compute stream
  bool copies_in_flight_ = false;         // queued, and the compute stream has not waited for them
};

}  // namespace ddprun::train
