#include "torch_pickle_reader.hpp"

#include <array>
#include <bit>
#include <cstring>
#include <memory>
#include <optional>
#include <unordered_map>
#include <unordered_set>
#include <variant>
#include <vector>

namespace ddprun::train {
namespace {

// The opcodes of the subset (names as in Python's pickletools).
enum class Op : uint8_t {
  kMark = '(',
  kStop = '.',
  kPop = '0',
  kPopMark = '1',
  kDup = '2',
  kBinInt = 'J',
  kBinInt1 = 'K',
  kBinInt2 = 'M',
  kNone = 'N',
  kBinPersId = 'Q',
  kReduce = 'R',
  kBinUnicode = 'X',
  kAppend = 'a',
  kBuild = 'b',
  kGlobal = 'c',
  kDict = 'd',
  kEmptyDict = '}',
  kAppends = 'e',
  kBinGet = 'h',
  kLongBinGet = 'j',
  kList = 'l',
  kEmptyList = ']',
  kBinPut = 'q',
  kLongBinPut = 'r',
  kSetItem = 's',
  kTuple = 't',
  kEmptyTuple = ')',
  kSetItems = 'u',
  kBinFloat = 'G',
  kProto = 0x80,
  kTuple1 = 0x85,
  kTuple2 = 0x86,
  kTuple3 = 0x87,
  kNewTrue = 0x88,
  kNewFalse = 0x89,
  kLong1 = 0x8a,
  kShortBinUnicode = 0x8c,
  kBinUnicode8 = 0x8d,
  kStackGlobal = 0x93,
  kMemoize = 0x94,
  kFrame = 0x95,
};

constexpr int kHighestProtocol = 5;

// A Python global the subset allows; anything else is refused when it is named.
struct GlobalRef {
  enum class Kind { kOrderedDict, kRebuildTensorV2, kRebuildParameter, kStorageType };
  Kind kind;
  c10::ScalarType dtype = c10::ScalarType::Undefined;  // kStorageType only
  std::string name;
};

// A storage loaded for a persistent id: the whole record as a flat tensor.
struct StorageRef {
  torch::Tensor flat;
};

// Tuples stay in this form until they are stored into a dict or list, because the tuples that
// feed persistent ids and REDUCE hold globals and storages, which are not IValues.
struct TupleNode;
using TupleRef = std::shared_ptr<const TupleNode>;
using Item = std::variant<c10::IValue, GlobalRef, StorageRef, TupleRef>;
struct TupleNode {
  std::vector<Item> items;
  int depth = 1;
  mutable std::optional<c10::IValue> converted;  // converted once, however often it is used
};

std::optional<GlobalRef> resolve_global(const std::string& module, const std::string& name) {
  using Kind = GlobalRef::Kind;
  const std::string full = module + "." + name;
  if (module == "collections" && name == "OrderedDict") {
    return GlobalRef{Kind::kOrderedDict, c10::ScalarType::Undefined, full};
  }
  if (module == "torch._utils" && name == "_rebuild_tensor_v2") {
    return GlobalRef{Kind::kRebuildTensorV2, c10::ScalarType::Undefined, full};
  }
  if (module == "torch._utils" && name == "_rebuild_parameter") {
    return GlobalRef{Kind::kRebuildParameter, c10::ScalarType::Undefined, full};
  }
  if (module == "torch") {
    static const std::array<std::pair<const char*, c10::ScalarType>, 10> storages{{
        {"FloatStorage", c10::ScalarType::Float},
        {"DoubleStorage", c10::ScalarType::Double},
        {"HalfStorage", c10::ScalarType::Half},
        {"BFloat16Storage", c10::ScalarType::BFloat16},
        {"LongStorage", c10::ScalarType::Long},
        {"IntStorage", c10::ScalarType::Int},
        {"ShortStorage", c10::ScalarType::Short},
        {"CharStorage", c10::ScalarType::Char},
        {"ByteStorage", c10::ScalarType::Byte},
        {"BoolStorage", c10::ScalarType::Bool},
    }};
    for (const auto& [storage_name, dtype] : storages) {
      if (name == storage_name) {
        return GlobalRef{Kind::kStorageType, dtype, full};
      }
    }
  }
  return std::nullopt;
}

bool is_container(const c10::IValue& v) {
  return v.isGenericDict() || v.isList() || v.isTuple();
}

class Unpickler {
 public:
  Unpickler(std::string_view bytes, const StorageLoader& load_storage)
      : bytes_(bytes), load_storage_(load_storage) {}

  c10::IValue run() {
    if (bytes_.size() > kMaxPickleBytes) {
      throw PickleError("the pickle is " + std::to_string(bytes_.size()) +
                        " bytes, more than the " + std::to_string(kMaxPickleBytes) +
                        " a state-dict snapshot needs");
    }
    while (pos_ < bytes_.size()) {
      op_start_ = pos_;
      const auto op = static_cast<Op>(read_u8());
      if (op == Op::kStop) {
        return to_ivalue(pop(), "the result");
      }
      step(op);
    }
    op_start_ = pos_;
    fail("the pickle ends before its STOP opcode (truncated)");
  }

 private:
  [[noreturn]] void fail(const std::string& what) const {
    throw PickleError(what + " (at byte " + std::to_string(op_start_) + ")");
  }

  // ---- input ----
  std::string_view take(uint64_t n) {
    if (n > bytes_.size() - pos_) {
      fail("the pickle ends inside an opcode's argument (truncated)");
    }
    const auto out = bytes_.substr(pos_, static_cast<size_t>(n));
    pos_ += static_cast<size_t>(n);
    return out;
  }
  uint8_t read_u8() { return static_cast<uint8_t>(take(1)[0]); }
  // Little-endian unsigned integer of `width` bytes (pickle's lengths and memo indices).
  uint64_t read_le(size_t width) {
    const auto raw = take(width);
    uint64_t value = 0;
    for (size_t k = width; k-- > 0;) {
      value = (value << 8) | static_cast<uint8_t>(raw[k]);
    }
    return value;
  }
  std::string read_line() {
    const auto end = bytes_.find('\n', pos_);
    if (end == std::string_view::npos || end - pos_ > kMaxPickleGlobalNameBytes) {
      fail("a GLOBAL name is unterminated or longer than " +
           std::to_string(kMaxPickleGlobalNameBytes) + " bytes");
    }
    std::string line(bytes_.substr(pos_, end - pos_));
    pos_ = end + 1;
    return line;
  }

  // ---- stack, marks, memo ----
  void push(Item item) {
    if (stack_.size() >= kMaxPickleStackItems) {
      fail("the pickle's stack grows past " + std::to_string(kMaxPickleStackItems) + " items");
    }
    stack_.push_back(std::move(item));
  }
  Item pop() {
    if (stack_.size() <= (marks_.empty() ? 0 : marks_.back())) {
      fail("an opcode pops from an empty stack (corrupt pickle)");
    }
    Item item = std::move(stack_.back());
    stack_.pop_back();
    return item;
  }
  Item& top() {
    if (stack_.size() <= (marks_.empty() ? 0 : marks_.back())) {
      fail("an opcode needs a value on an empty stack (corrupt pickle)");
    }
    return stack_.back();
  }
  std::vector<Item> pop_to_mark() {
    if (marks_.empty()) {
      fail("an opcode needs a MARK and there is none (corrupt pickle)");
    }
    const size_t mark = marks_.back();
    marks_.pop_back();
    std::vector<Item> items(std::make_move_iterator(stack_.begin() + static_cast<ptrdiff_t>(mark)),
                            std::make_move_iterator(stack_.end()));
    stack_.resize(mark);
    return items;
  }
  void memo_put(uint64_t index, const Item& item) {
    if (memo_.size() >= kMaxPickleMemoEntries && memo_.count(index) == 0) {
      fail("the pickle's memo grows past " + std::to_string(kMaxPickleMemoEntries) + " entries");
    }
    memo_.insert_or_assign(index, item);
  }
  Item memo_get(uint64_t index) {
    const auto it = memo_.find(index);
    if (it == memo_.end()) {
      fail("memo entry " + std::to_string(index) + " is used before it is stored (corrupt pickle)");
    }
    return it->second;
  }

  // ---- containers: creation, nesting depth, no change after nesting ----
  c10::IValue new_dict() {
    auto dict = c10::IValue(c10::impl::GenericDict(c10::AnyType::get(), c10::AnyType::get()));
    track(dict, 1);
    return dict;
  }
  c10::IValue new_list() {
    auto list = c10::IValue(c10::impl::GenericList(c10::AnyType::get()));
    track(list, 1);
    return list;
  }
  void track(const c10::IValue& container, int depth) {
    const void* id = container.internalToPointer();
    sealed_.erase(id);  // a new container may reuse a freed one's address
    depth_[id] = depth;
  }
  int depth_of(const Item& item) const {
    if (const auto* tuple = std::get_if<TupleRef>(&item)) {
      return (*tuple)->depth;
    }
    if (const auto* value = std::get_if<c10::IValue>(&item); value && is_container(*value)) {
      const auto it = depth_.find(value->internalToPointer());
      return it != depth_.end() ? it->second : 1;
    }
    return 0;
  }
  // `child` is about to live inside a container of the given identity: it may not change any
  // more, may not be that container, and the nesting stays bounded. Returns the child's depth.
  int nest(const Item& child, const void* parent) {
    if (const auto* value = std::get_if<c10::IValue>(&child); value && is_container(*value)) {
      if (value->internalToPointer() == parent) {
        fail("a container holds itself (recursive data is not a state dict)");
      }
      sealed_.insert(value->internalToPointer());
    }
    const int depth = depth_of(child) + 1;
    if (depth > kMaxPickleNesting) {
      fail("containers nest deeper than " + std::to_string(kMaxPickleNesting) + " levels");
    }
    return depth;
  }
  c10::IValue& open_container(Item& item, bool dict) {
    auto* value = std::get_if<c10::IValue>(&item);
    if (value == nullptr || (dict ? !value->isGenericDict() : !value->isList())) {
      fail(dict ? "SETITEM(S) targets something that is not a dict"
                : "APPEND(S) targets something that is not a list");
    }
    if (sealed_.count(value->internalToPointer()) != 0) {
      fail("the pickle changes a container after nesting it, which torch.save never does");
    }
    return *value;
  }
  void grow(const c10::IValue& container, int child_depth) {
    auto& depth = depth_[container.internalToPointer()];
    depth = std::max(depth, child_depth);
  }
  void set_items(Item& target, std::vector<Item>& items, size_t first) {
    auto& dict_value = open_container(target, true);
    auto dict = dict_value.toGenericDict();
    if ((items.size() - first) % 2 != 0) {
      fail("SETITEMS has a key without a value (corrupt pickle)");
    }
    for (size_t k = first; k < items.size(); k += 2) {
      auto key = to_ivalue(items[k], "a dict key");
      if (!(key.isString() || key.isInt() || key.isDouble() || key.isBool() || key.isNone())) {
        fail("a dict key is a " + key.tagKind() + "; only strings and numbers are keys here");
      }
      grow(dict_value, nest(items[k + 1], dict_value.internalToPointer()));
      dict.insert_or_assign(std::move(key), to_ivalue(items[k + 1], "a dict value"));
    }
  }
  void append_items(Item& target, std::vector<Item>& items) {
    auto& list_value = open_container(target, false);
    auto list = list_value.toList();
    for (auto& item : items) {
      grow(list_value, nest(item, list_value.internalToPointer()));
      list.push_back(to_ivalue(item, "a list element"));
    }
  }
  Item make_tuple(std::vector<Item> items) {
    auto node = std::make_shared<TupleNode>();
    for (const auto& item : items) {
      node->depth = std::max(node->depth, nest(item, node.get()));
    }
    node->items = std::move(items);
    return TupleRef(std::move(node));
  }

  c10::IValue to_ivalue(const Item& item, const char* where) {
    if (const auto* value = std::get_if<c10::IValue>(&item)) {
      return *value;
    }
    if (const auto* tuple = std::get_if<TupleRef>(&item)) {
      if (!(*tuple)->converted) {
        std::vector<c10::IValue> elements;
        elements.reserve((*tuple)->items.size());
        for (const auto& element : (*tuple)->items) {
          elements.push_back(to_ivalue(element, where));
        }
        (*tuple)->converted = c10::ivalue::Tuple::create(std::move(elements));
      }
      return *(*tuple)->converted;
    }
    if (const auto* global = std::get_if<GlobalRef>(&item)) {
      fail(std::string(where) + " is the bare name " + global->name + ", not data");
    }
    fail(std::string(where) + " is a bare storage, not a tensor");
  }

  // ---- typed reads of REDUCE arguments ----
  int64_t int_of(const Item& item, const char* what) {
    const auto* value = std::get_if<c10::IValue>(&item);
    if (value == nullptr || !value->isInt()) {
      fail(std::string(what) + " is not an integer");
    }
    return value->toInt();
  }
  std::string string_of(const Item& item, const char* what) {
    const auto* value = std::get_if<c10::IValue>(&item);
    if (value == nullptr || !value->isString()) {
      fail(std::string(what) + " is not a string");
    }
    return value->toStringRef();
  }
  std::vector<int64_t> ints_of(const Item& item, const char* what) {
    const auto* tuple = std::get_if<TupleRef>(&item);
    if (tuple == nullptr) {
      fail(std::string(what) + " is not a tuple");
    }
    if (static_cast<int64_t>((*tuple)->items.size()) > kMaxTensorDims) {
      fail(std::string(what) + " has more than " + std::to_string(kMaxTensorDims) + " dimensions");
    }
    std::vector<int64_t> out;
    for (const auto& element : (*tuple)->items) {
      out.push_back(int_of(element, what));
    }
    return out;
  }

  // ---- tensors ----
  StorageRef persistent_load(const Item& pid) {
    const auto* tuple = std::get_if<TupleRef>(&pid);
    if (tuple == nullptr || (*tuple)->items.size() != 5 ||
        string_of((*tuple)->items[0], "a persistent id's tag") != "storage") {
      fail("a persistent id is not ('storage', type, key, location, numel)");
    }
    const auto& items = (*tuple)->items;
    const auto* type = std::get_if<GlobalRef>(&items[1]);
    if (type == nullptr || type->kind != GlobalRef::Kind::kStorageType) {
      fail("a persistent id does not name a storage type");
    }
    StorageRequest request{string_of(items[2], "a storage key"), type->dtype,
                           int_of(items[4], "a storage's element count")};
    string_of(items[3], "a storage location");  // any device: everything loads onto the CPU
    if (request.numel < 0) {
      fail("storage " + request.key + " has a negative element count");
    }
    const auto cached = storages_.find(request.key);
    if (cached != storages_.end()) {
      if (cached->second.flat.scalar_type() != request.dtype ||
          cached->second.flat.numel() != request.numel) {
        fail("storage " + request.key + " is described twice, differently");
      }
      return cached->second;
    }
    auto flat = load_storage_(request);
    if (!flat.defined() || flat.dim() != 1 || flat.numel() != request.numel ||
        flat.scalar_type() != request.dtype || !flat.is_contiguous()) {
      fail("storage " + request.key + " did not load as " + std::to_string(request.numel) +
           " elements of its type");
    }
    return storages_.emplace(request.key, StorageRef{std::move(flat)}).first->second;
  }

  torch::Tensor rebuild_tensor(const std::vector<Item>& args) {
    if (args.size() != 6 && args.size() != 7) {
      fail("_rebuild_tensor_v2 takes 6 or 7 arguments, not " + std::to_string(args.size()));
    }
    const auto* storage = std::get_if<StorageRef>(&args[0]);
    if (storage == nullptr) {
      fail("_rebuild_tensor_v2's first argument is not a storage");
    }
    const int64_t offset = int_of(args[1], "a tensor's storage offset");
    const auto sizes = ints_of(args[2], "a tensor's size");
    const auto strides = ints_of(args[3], "a tensor's stride");
    if (sizes.size() != strides.size()) {
      fail("a tensor's size and stride differ in length");
    }
    const int64_t available = storage->flat.numel();
    // The view must lie inside the storage: offset + sum((size - 1) * stride) < numel.
    int64_t last = offset;
    bool empty = false;
    bool ok = offset >= 0;
    for (size_t d = 0; ok && d < sizes.size(); ++d) {
      ok = sizes[d] >= 0 && strides[d] >= 0;
      empty = empty || sizes[d] == 0;
      int64_t reach = 0;
      ok = ok && (sizes[d] == 0 || (!__builtin_mul_overflow(sizes[d] - 1, strides[d], &reach) &&
                                    !__builtin_add_overflow(last, reach, &last)));
    }
    if (!ok || (empty ? offset > available : last >= available)) {
      fail("a tensor of size " + c10::str(c10::IntArrayRef(sizes)) + " and stride " +
           c10::str(c10::IntArrayRef(strides)) + " at offset " + std::to_string(offset) +
           " does not fit its storage of " + std::to_string(available) + " elements");
    }
    return storage->flat.as_strided(sizes, strides, offset);
  }

  Item reduce(const Item& callable, const Item& arguments) {
    const auto* global = std::get_if<GlobalRef>(&callable);
    const auto* tuple = std::get_if<TupleRef>(&arguments);
    if (global == nullptr || tuple == nullptr) {
      fail("REDUCE applies something other than an allowed global to a tuple");
    }
    const auto& args = (*tuple)->items;
    switch (global->kind) {
      case GlobalRef::Kind::kOrderedDict:
        if (!args.empty()) {
          fail("collections.OrderedDict is called with arguments");
        }
        return new_dict();
      case GlobalRef::Kind::kRebuildTensorV2:
        return c10::IValue(rebuild_tensor(args));
      case GlobalRef::Kind::kRebuildParameter: {
        const auto* data = args.empty() ? nullptr : std::get_if<c10::IValue>(&args[0]);
        if (data == nullptr || !data->isTensor()) {
          fail("_rebuild_parameter's first argument is not a tensor");
        }
        return *data;
      }
      case GlobalRef::Kind::kStorageType:
        break;
    }
    fail(global->name + " is called, which torch.save never does");
  }

  void push_global(const std::string& module, const std::string& name) {
    auto global = resolve_global(module, name);
    if (!global) {
      fail("the pickle refers to " + module + "." + name +
           ", which is not part of a tensor state dict (only dicts, OrderedDicts, lists, tuples, "
           "numbers, strings and tensors are read)");
    }
    push(std::move(*global));
  }

  // Protocol, framing and the stack's own operations. False: not an opcode of this kind.
  bool control(Op op) {
    switch (op) {
      case Op::kProto: {
        const auto version = read_u8();
        if (version > kHighestProtocol) {
          fail("pickle protocol " + std::to_string(version) + " is newer than 5");
        }
        return true;
      }
      case Op::kFrame:
        read_le(8);  // framing is only a read-ahead hint
        return true;
      case Op::kMark:
        if (marks_.size() >= kMaxPickleMarks) {
          fail("more than " + std::to_string(kMaxPickleMarks) + " open MARKs");
        }
        marks_.push_back(stack_.size());
        return true;
      case Op::kPop:
        pop();
        return true;
      case Op::kPopMark:
        pop_to_mark();
        return true;
      case Op::kDup: {
        Item copy = top();
        push(std::move(copy));
        return true;
      }
      default:
        return false;
    }
  }

  // None, booleans, integers, floats, strings. False: not an opcode of this kind.
  bool push_scalar(Op op) {
    switch (op) {
      case Op::kNone:
        push(c10::IValue());
        return true;
      case Op::kNewTrue:
        push(c10::IValue(true));
        return true;
      case Op::kNewFalse:
        push(c10::IValue(false));
        return true;
      case Op::kBinInt:
        push(c10::IValue(static_cast<int64_t>(static_cast<int32_t>(read_le(4)))));
        return true;
      case Op::kBinInt1:
        push(c10::IValue(static_cast<int64_t>(read_le(1))));
        return true;
      case Op::kBinInt2:
        push(c10::IValue(static_cast<int64_t>(read_le(2))));
        return true;
      case Op::kLong1: {
        const auto width = read_u8();
        if (width > 8) {
          fail("an integer is wider than 64 bits");
        }
        uint64_t raw = width == 0 ? 0 : read_le(width);
        if (width > 0 && width < 8 && (raw >> (8 * width - 1)) != 0) {
          raw |= ~uint64_t{0} << (8 * width);  // sign-extend two's complement
        }
        push(c10::IValue(static_cast<int64_t>(raw)));
        return true;
      }
      case Op::kBinFloat: {
        const auto raw = take(8);
        uint64_t bits = 0;
        for (const char c : raw) {
          bits = (bits << 8) | static_cast<uint8_t>(c);  // big-endian
        }
        push(c10::IValue(std::bit_cast<double>(bits)));
        return true;
      }
      case Op::kShortBinUnicode:
        push(c10::IValue(std::string(take(read_le(1)))));
        return true;
      case Op::kBinUnicode:
        push(c10::IValue(std::string(take(read_le(4)))));
        return true;
      case Op::kBinUnicode8:
        push(c10::IValue(std::string(take(read_le(8)))));
        return true;
      default:
        return false;
    }
  }

  // Dicts, lists and tuples, and what fills them. False: not an opcode of this kind.
  bool build_container(Op op) {
    switch (op) {
      case Op::kEmptyDict:
        push(new_dict());
        return true;
      case Op::kEmptyList:
        push(new_list());
        return true;
      case Op::kEmptyTuple:
        push(make_tuple({}));
        return true;
      case Op::kTuple:
        push(make_tuple(pop_to_mark()));
        return true;
      case Op::kTuple1:
      case Op::kTuple2:
      case Op::kTuple3: {
        const size_t n = static_cast<size_t>(op) - static_cast<size_t>(Op::kTuple1) + 1;
        std::vector<Item> items(n);
        for (size_t k = n; k-- > 0;) {
          items[k] = pop();
        }
        push(make_tuple(std::move(items)));
        return true;
      }
      case Op::kList: {
        auto items = pop_to_mark();
        Item list = new_list();
        append_items(list, items);
        push(std::move(list));
        return true;
      }
      case Op::kDict: {
        auto items = pop_to_mark();
        Item dict = new_dict();
        set_items(dict, items, 0);
        push(std::move(dict));
        return true;
      }
      case Op::kAppend: {
        std::vector<Item> items;
        items.push_back(pop());
        append_items(top(), items);
        return true;
      }
      case Op::kAppends: {
        auto items = pop_to_mark();
        append_items(top(), items);
        return true;
      }
      case Op::kSetItem: {
        std::vector<Item> items(2);
        items[1] = pop();
        items[0] = pop();
        set_items(top(), items, 0);
        return true;
      }
      case Op::kSetItems: {
        auto items = pop_to_mark();
        set_items(top(), items, 0);
        return true;
      }
      default:
        return false;
    }
  }

  // The memo: PUT and GET. False: not an opcode of this kind.
  bool use_memo(Op op) {
    switch (op) {
      case Op::kBinPut:
        memo_put(read_le(1), top());
        return true;
      case Op::kLongBinPut:
        memo_put(read_le(4), top());
        return true;
      case Op::kMemoize:
        memo_put(memo_.size(), top());
        return true;
      case Op::kBinGet:
        push(memo_get(read_le(1)));
        return true;
      case Op::kLongBinGet:
        push(memo_get(read_le(4)));
        return true;
      default:
        return false;
    }
  }

  // Globals, REDUCE, persistent ids (the tensors' storages) and BUILD. False: not an opcode of this
  // kind.
  bool call_object(Op op) {
    switch (op) {
      case Op::kGlobal: {
        const auto module = read_line();
        const auto name = read_line();
        push_global(module, name);
        return true;
      }
      case Op::kStackGlobal: {
        const auto name = string_of(pop(), "STACK_GLOBAL's name");
        const auto module = string_of(pop(), "STACK_GLOBAL's module");
        push_global(module, name);
        return true;
      }
      case Op::kReduce: {
        auto arguments = pop();
        auto callable = pop();
        push(reduce(callable, arguments));
        return true;
      }
      case Op::kBinPersId:
        push(persistent_load(pop()));
        return true;
      case Op::kBuild: {
        // OrderedDict.__reduce__ carries instance attributes (a state_dict's _metadata, the
        // modules' versions) as BUILD's state; LibTorch has no use for them.
        pop();
        const auto* target = std::get_if<c10::IValue>(&top());
        if (target == nullptr || !target->isGenericDict()) {
          fail("BUILD sets the state of something other than a dict");
        }
        return true;
      }
      default:
        return false;
    }
  }

  void step(Op op) {
    // STOP is handled by run().
    if (control(op) || push_scalar(op) || build_container(op) || use_memo(op) || call_object(op))
      return;
    char hex[8];
    std::snprintf(hex, sizeof hex, "0x%02x", static_cast<unsigned>(op));
    fail(std::string("unsupported pickle opcode ") + hex +
         " (not one torch.save writes for a state dict)");
  }

  std::string_view bytes_;
  const StorageLoader& load_storage_;
  size_t pos_ = 0;
  size_t op_start_ = 0;
  std::vector<Item> stack_;
  std::vector<size_t> marks_;
  std::unordered_map<uint64_t, Item> memo_;
  std::unordered_map<std::string, StorageRef> storages_;
  std::unordered_map<const void*, int> depth_;
  std::unordered_set<const void*> sealed_;
};

}  // namespace

c10::IValue read_torch_pickle(std::string_view pickle, const StorageLoader& load_storage) {
  return Unpickler(pickle, load_storage).run();
}

}  // namespace ddprun::train
