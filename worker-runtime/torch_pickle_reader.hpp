#pragma once
// A bounded unpickler for exactly the subset of Python's pickle that torch.save writes for a
// state-dict snapshot (and that LibTorch's untagged Pickler writes for ours): dicts (plain and
// collections.OrderedDict), lists, tuples, strings, ints, floats, bools, None, and tensors as
// torch._utils._rebuild_tensor_v2 over persistent-id storages. LibTorch's own unpickler cannot be
// used: up to at least 2.13 it turns collections.OrderedDict into None, so a module's state_dict
// (what minGPT-ddp saves as model_state) fails with "isGenericDict() INTERNAL ASSERT FAILED".
//
// Every other global (arbitrary Python objects) is refused, nothing is executed, every length is
// checked against the bytes left, and the stack, memo, marks and container nesting are capped.
// Containers may not be changed once nested in another (torch.save never does), so the result has
// no cycles. Tensors are views checked to lie inside their storage.
//
// Error policy: any problem throws PickleError whose message says what is wrong and at which
// byte offset; the caller adds the file's name. Single-threaded; no I/O (storages come from the
// caller's loader).
#include <torch/torch.h>

#include <cstddef>
#include <functional>
#include <stdexcept>
#include <string>
#include <string_view>

namespace ddprun::train {

class PickleError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Named limits. A minGPT state dict's pickle is a few hundred bytes per tensor and nests five
// containers deep; these leave room for models far larger than any this trainer builds.
inline constexpr size_t kMaxPickleBytes = size_t{64} << 20;
inline constexpr size_t kMaxPickleStackItems = size_t{1} << 20;
inline constexpr size_t kMaxPickleMemoEntries = size_t{1} << 22;
inline constexpr size_t kMaxPickleMarks = size_t{1} << 16;
inline constexpr int kMaxPickleNesting = 64;
inline constexpr size_t kMaxPickleGlobalNameBytes = 256;
inline constexpr int64_t kMaxTensorDims = 16;

// What a persistent id ('storage', <storage class>, key, location, numel) asks for.
struct StorageRequest {
  std::string key;  // the archive's record data/<key>
  c10::ScalarType dtype = c10::ScalarType::Float;
  int64_t numel = 0;
};

// Returns a contiguous 1-D CPU tensor of request.numel elements of request.dtype, or throws
// (PickleError or anything else: the caller's message then names the record). Called once per
// distinct key; the reader caches the result.
using StorageLoader = std::function<torch::Tensor(const StorageRequest& request)>;

// Unpickles `pickle` (at most kMaxPickleBytes). Dicts and lists come back as GenericDict and
// GenericList of AnyType, tuples as Tuple, tensors on the CPU.
c10::IValue read_torch_pickle(std::string_view pickle, const StorageLoader& load_storage);

}  // namespace ddprun::train
