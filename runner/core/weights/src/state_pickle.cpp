#include "runner/weights/state_pickle.hpp"

#include <algorithm>
#include <array>
#include <cstdio>
#include <limits>
#include <optional>
#include <span>
#include <vector>

namespace runner::weights::detail {
namespace {

// The opcodes of pickle protocol 2 that torch.save writes for dicts of
// tensors and for the plain values a checkpoint holds beside them.
enum Op : std::uint8_t {
  kMark = '(',
  kStop = '.',
  kBinInt = 'J',
  kBinInt1 = 'K',
  kBinInt2 = 'M',
  kNone = 'N',
  kBinPersId = 'Q',
  kReduce = 'R',
  kBinUnicode = 'X',
  kEmptyList = ']',
  kAppend = 'a',
  kBuild = 'b',
  kGlobal = 'c',
  kDict = 'd',
  kAppends = 'e',
  kBinFloat = 'G',
  kBinGet = 'h',
  kLongBinGet = 'j',
  kList = 'l',
  kBinPut = 'q',
  kLongBinPut = 'r',
  kSetItem = 's',
  kTuple = 't',
  kSetItems = 'u',
  kEmptyDict = '}',
  kEmptyTuple = ')',
  kProto = 0x80,
  kNewObj = 0x81,
  kTuple1 = 0x85,
  kTuple2 = 0x86,
  kTuple3 = 0x87,
  kNewTrue = 0x88,
  kNewFalse = 0x89,
  kLong1 = 0x8a,
};

// The storage types torch.save names ("torch FloatStorage") and their element sizes.
struct StorageType {
  std::string_view name;
  std::int64_t item_size;
};
constexpr std::array<StorageType, 10> kStorageTypes{{
    {"FloatStorage", 4},
    {"HalfStorage", 2},
    {"BFloat16Storage", 2},
    {"DoubleStorage", 8},
    {"LongStorage", 8},
    {"IntStorage", 4},
    {"ShortStorage", 2},
    {"CharStorage", 1},
    {"ByteStorage", 1},
    {"BoolStorage", 1},
}};

enum class Kind : std::uint8_t {
  other,         // a scalar, a string, a tuple, a tensor
  integer,       // number holds it
  storage_type,  // torch.<T>Storage; number holds its element size
  pid,           // ('storage', storage type, key, location, numel), numel checked
  tensor_maker,  // torch._utils._rebuild_tensor_v2 or _rebuild_parameter
  odict_class,   // collections.OrderedDict (dropped from the output)
  odict_args,    // the () it is called with (dropped)
  list,
  dict,
};

constexpr std::size_t kNoObject = std::numeric_limits<std::size_t>::max();

struct Value {
  Kind kind = Kind::other;
  int depth = 0;                   // nesting of containers in it (lists and dicts: see Object)
  std::size_t object = kNoObject;  // lists and dicts: their index in objects_
  std::int64_t number = 0;
};

// A list or a dict. Once it is an item of another container it is frozen:
// changing it then could make a cycle or deepen what holds it unseen.
struct Object {
  int depth = 1;
  bool frozen = false;
};

const std::string kResave = "save the weights again with torch.save(model.state_dict(), path)";

class Rewriter {
 public:
  Rewriter(std::string_view in, std::uint64_t max_storage_bytes)
      : in_(in), max_storage_bytes_(max_storage_bytes) {
    out_.reserve(in.size() + 64);
  }

  std::string run() {
    bool first = true;
    while (pos_ < in_.size()) {
      op_at_ = pos_;
      const auto op = static_cast<std::uint8_t>(in_[pos_++]);
      if (first && op != kProto) malformed("it does not start with a PROTO opcode");
      first = false;
      if (op == kStop) {
        if (stack_.size() != 1 || !marks_.empty())
          malformed("it stops with " + std::to_string(stack_.size()) + " values on the stack");
        if (stack_.back().kind == Kind::odict_class || stack_.back().kind == Kind::odict_args)
          malformed("collections.OrderedDict is used other than as OrderedDict()");
        out_.push_back(static_cast<char>(kStop));
        return std::move(out_);
      }
      step(op);
    }
    op_at_ = in_.size();
    malformed("it ends before its STOP opcode (cut short?)");
  }

 private:
  [[noreturn]] void malformed(const std::string& what) const {
    throw PickleError("its data.pkl is malformed at byte " + std::to_string(op_at_) + ": " + what,
                      "the file is damaged; " + kResave);
  }

  std::string_view take(std::size_t n) {
    if (n > in_.size() - pos_) malformed("an argument runs past the end");
    const std::string_view bytes = in_.substr(pos_, n);
    pos_ += n;
    return bytes;
  }
  std::uint64_t little_endian(std::size_t n) {
    const std::string_view bytes = take(n);
    std::uint64_t v = 0;
    for (std::size_t i = n; i-- > 0;) v = (v << 8) | static_cast<std::uint8_t>(bytes[i]);
    return v;
  }
  std::string_view line() {
    constexpr std::size_t kLongest = 256;
    const std::size_t end = in_.find('\n', pos_);
    if (end == std::string_view::npos || end - pos_ > kLongest)
      malformed("a GLOBAL name is not a line of at most 256 characters");
    const std::string_view text = in_.substr(pos_, end - pos_);
    for (const char c : text)
      if (static_cast<unsigned char>(c) < 0x20 || static_cast<unsigned char>(c) > 0x7e)
        malformed("a GLOBAL name holds a byte that is not printable ASCII");
    pos_ = end + 1;
    return text;
  }
  void emit(std::string_view bytes) { out_.append(bytes); }
  void emit_op() { out_.append(in_.substr(op_at_, pos_ - op_at_)); }

  std::size_t floor() const { return marks_.empty() ? 0 : marks_.back(); }
  void need(std::size_t n, const char* op) const {
    if (stack_.size() - floor() < n)
      malformed(std::string(op) + " needs " + std::to_string(n) +
                " values on the stack, above any mark");
  }
  std::vector<Value> pop_to_mark(const char* op) {
    if (marks_.empty()) malformed(std::string(op) + " has no mark to pop to");
    const std::size_t start = marks_.back();
    marks_.pop_back();
    std::vector<Value> items(stack_.begin() + static_cast<std::ptrdiff_t>(start), stack_.end());
    stack_.resize(start);
    return items;
  }
  std::vector<Value> pop(std::size_t n) {
    std::vector<Value> items(stack_.end() - static_cast<std::ptrdiff_t>(n), stack_.end());
    stack_.resize(stack_.size() - n);
    return items;
  }

  int depth_of(const Value& v) const {
    return v.object == kNoObject ? v.depth : objects_[v.object].depth;
  }
  /// Freezes the containers among `items`; returns the depth of what holds them.
  int hold(std::span<const Value> items) {
    int deepest = 0;
    for (const Value& v : items) {
      if (v.object != kNoObject) objects_[v.object].frozen = true;
      deepest = std::max(deepest, depth_of(v));
    }
    if (deepest + 1 > kMaxPickleDepth)
      throw PickleError("its data.pkl nests lists, tuples or dicts more than " +
                            std::to_string(kMaxPickleDepth) + " deep",
                        "a state dict is a flat dict of name -> tensor; " + kResave);
    return deepest + 1;
  }
  Value new_container(Kind kind, std::span<const Value> items) {
    const int depth = hold(items);
    objects_.push_back(Object{depth, false});
    return Value{kind, 0, objects_.size() - 1, 0};
  }
  void add_to(const Value& target, Kind kind, std::span<const Value> items, const char* op) {
    const int depth = hold(items);
    if (target.kind != kind || target.object == kNoObject)
      malformed(std::string(op) + " adds to something that is not a " +
                (kind == Kind::list ? "list" : "dict"));
    Object& object = objects_[target.object];
    if (object.frozen)
      malformed(std::string(op) + " changes a container after it was put in another one");
    object.depth = std::max(object.depth, depth);
  }
  /// A tuple from MARK ... TUPLE, which is how Python writes one of more than 3 items.
  Value long_tuple(std::span<const Value> items) {
    Value t{Kind::other, hold(items), kNoObject, 0};
    // A storage's persistent id: ('storage', <T>Storage, key, location, numel).
    if (items.size() == 5 && items[1].kind == Kind::storage_type &&
        items[4].kind == Kind::integer) {
      const std::int64_t numel = items[4].number;
      const auto item_size = static_cast<std::uint64_t>(items[1].number);
      if (numel < 0 || static_cast<std::uint64_t>(numel) > max_storage_bytes_ / item_size)
        malformed("a tensor storage of " + std::to_string(numel) + " elements" +
                  (numel < 0 ? "" : ", more than the file holds"));
      t.kind = Kind::pid;
    }
    return t;
  }

  void global() {
    const std::string module(line());
    const std::string name(line());
    if (module == "collections" && name == "OrderedDict") {
      stack_.push_back(Value{Kind::odict_class});
      return;  // dropped: see the header
    }
    if (module == "torch._utils" &&
        (name == "_rebuild_tensor_v2" || name == "_rebuild_parameter")) {
      emit_op();
      stack_.push_back(Value{Kind::tensor_maker});
      return;
    }
    if (module == "torch") {
      for (const StorageType& s : kStorageTypes) {
        if (name != s.name) continue;
        emit_op();
        stack_.push_back(Value{Kind::storage_type, 0, kNoObject, s.item_size});
        return;
      }
    }
    if (module.rfind("__torch__", 0) == 0)
      throw PickleError("it is a TorchScript module (torch.jit.save), not a state dict",
                        "save its weights in Python with torch.save(module.state_dict(), path)");
    throw PickleError("its data.pkl needs Python's " + module + "." + name +
                          ", which a state dict of tensors does not",
                      "save only the weights: torch.save(model.state_dict(), path)");
  }

  void memo_put(std::uint64_t id) {
    if (stack_.size() == floor()) malformed("a memo put with nothing to store");
    // Python numbers memo entries 0, 1, 2, ...: a larger index is damage, and
    // would make LibTorch grow its memo table to that size.
    if (id > puts_) malformed("memo index " + std::to_string(id) + " skips ahead");
    ++puts_;
    if (memo_.size() <= id) memo_.resize(id + 1);
    memo_[id] = stack_.back();
    if (stack_.back().kind != Kind::odict_class) emit_op();
  }
  void memo_get(std::uint64_t id) {
    if (id >= memo_.size() || !memo_[id])
      malformed("memo index " + std::to_string(id) + " was never stored");
    stack_.push_back(*memo_[id]);
    if (stack_.back().kind != Kind::odict_class) emit_op();
  }

  void step(std::uint8_t op) {
    // An OrderedDict is only ever called with (), right away.
    if (!stack_.empty() && stack_.back().kind == Kind::odict_class && op != kBinPut &&
        op != kLongBinPut && op != kEmptyTuple)
      malformed("collections.OrderedDict is used other than as OrderedDict()");
    if (!stack_.empty() && stack_.back().kind == Kind::odict_args && op != kReduce)
      malformed("collections.OrderedDict is used other than as OrderedDict()");
    switch (op) {
      case kProto: {
        const auto protocol = static_cast<std::uint8_t>(take(1)[0]);
        if (op_at_ != 0) malformed("a second PROTO opcode");
        if (protocol != 2)
          throw PickleError("its data.pkl uses pickle protocol " + std::to_string(protocol) +
                                "; runner reads protocol 2, which torch.save writes by default",
                            "save it again without pickle_protocol: torch.save(model.state_dict(), "
                            "path)");
        emit_op();
        return;
      }
      case kMark:
        marks_.push_back(stack_.size());
        emit_op();
        return;
      case kNone:
      case kNewTrue:
      case kNewFalse:
        stack_.push_back(Value{});
        emit_op();
        return;
      case kBinInt1:
      case kBinInt2:
      case kBinInt: {
        const std::size_t n = op == kBinInt1 ? 1 : op == kBinInt2 ? 2 : 4;
        std::int64_t v = static_cast<std::int64_t>(little_endian(n));
        if (op == kBinInt) v = static_cast<std::int32_t>(static_cast<std::uint32_t>(v));
        stack_.push_back(Value{Kind::integer, 0, kNoObject, v});
        emit_op();
        return;
      }
      case kLong1: {
        const auto n = static_cast<std::uint8_t>(take(1)[0]);
        if (n > 8)
          throw PickleError("its data.pkl holds an integer wider than 64 bits",
                            "a state dict holds tensors; " + kResave);
        std::uint64_t v = n == 0 ? 0 : little_endian(n);
        if (n > 0 && n < 8 && (v >> (8 * n - 1)) != 0) v |= ~0ULL << (8 * n);  // sign-extend
        std::array<char, 10> wide{static_cast<char>(kLong1), 8};
        for (std::size_t i = 0; i < 8; ++i) wide[2 + i] = static_cast<char>((v >> (8 * i)) & 0xFF);
        emit({wide.data(), wide.size()});
        stack_.push_back(Value{Kind::integer, 0, kNoObject, static_cast<std::int64_t>(v)});
        return;
      }
      case kBinFloat:
        (void)take(8);
        stack_.push_back(Value{});
        emit_op();
        return;
      case kBinUnicode:
        (void)take(little_endian(4));
        stack_.push_back(Value{});
        emit_op();
        return;
      case kEmptyTuple:
        if (!stack_.empty() && stack_.back().kind == Kind::odict_class) {
          stack_.push_back(Value{Kind::odict_args});
          return;
        }
        stack_.push_back(Value{Kind::other, 1});
        emit_op();
        return;
      case kTuple1:
      case kTuple2:
      case kTuple3: {
        const std::size_t n = op - kTuple1 + 1;
        need(n, "TUPLE");
        const auto items = pop(n);
        stack_.push_back(Value{Kind::other, hold(items)});
        emit_op();
        return;
      }
      case kTuple: {
        const auto items = pop_to_mark("TUPLE");
        stack_.push_back(long_tuple(items));
        emit_op();
        return;
      }
      case kEmptyList:
        stack_.push_back(new_container(Kind::list, {}));
        emit_op();
        return;
      case kEmptyDict:
        stack_.push_back(new_container(Kind::dict, {}));
        emit_op();
        return;
      case kList: {
        const auto items = pop_to_mark("LIST");
        stack_.push_back(new_container(Kind::list, items));
        emit_op();
        return;
      }
      case kDict: {
        const auto items = pop_to_mark("DICT");
        if (items.size() % 2 != 0) malformed("DICT with a key that has no value");
        stack_.push_back(new_container(Kind::dict, items));
        emit_op();
        return;
      }
      case kAppend: {
        need(2, "APPEND");
        add_to(stack_[stack_.size() - 2], Kind::list, {&stack_.back(), 1}, "APPEND");
        stack_.pop_back();
        emit_op();
        return;
      }
      case kSetItem: {
        need(3, "SETITEM");
        add_to(stack_[stack_.size() - 3], Kind::dict,
               {stack_.data() + stack_.size() - 2, 2}, "SETITEM");
        stack_.resize(stack_.size() - 2);
        emit_op();
        return;
      }
      case kAppends:
      case kSetItems: {
        const char* name = op == kAppends ? "APPENDS" : "SETITEMS";
        const auto items = pop_to_mark(name);
        if (stack_.size() == floor())
          malformed(std::string(name) + " has no container below its mark");
        if (op == kSetItems && items.size() % 2 != 0)
          malformed("SETITEMS with a key that has no value");
        add_to(stack_.back(), op == kAppends ? Kind::list : Kind::dict, items, name);
        emit_op();
        return;
      }
      case kBinPut:
        memo_put(little_endian(1));
        return;
      case kLongBinPut:
        memo_put(little_endian(4));
        return;
      case kBinGet:
        memo_get(little_endian(1));
        return;
      case kLongBinGet:
        memo_get(little_endian(4));
        return;
      case kGlobal:
        global();
        return;
      case kReduce: {
        need(2, "REDUCE");
        const Value callable = stack_[stack_.size() - 2];
        if (callable.kind == Kind::odict_class && stack_.back().kind == Kind::odict_args) {
          (void)pop(2);
          stack_.push_back(new_container(Kind::dict, {}));
          out_.push_back(static_cast<char>(kEmptyDict));
          return;
        }
        if (callable.kind != Kind::tensor_maker)
          malformed("REDUCE calls something that is not a tensor constructor");
        (void)hold({&stack_.back(), 1});
        (void)pop(2);
        stack_.push_back(Value{});  // a tensor
        emit_op();
        return;
      }
      case kBinPersId: {
        need(1, "BINPERSID");
        if (stack_.back().kind != Kind::pid)
          malformed("a persistent id that is not ('storage', type, key, location, size)");
        stack_.back() = Value{};  // a storage, as a tensor
        emit_op();
        return;
      }
      case kBuild: {
        need(2, "BUILD");
        if (stack_[stack_.size() - 2].kind != Kind::dict)
          malformed("BUILD sets the state of something that is not a dict");
        (void)hold({&stack_.back(), 1});
        stack_.pop_back();
        // NEWOBJ in LibTorch pops the top of the stack: the attributes
        // (_metadata) are dropped and the dict stays.
        out_.push_back(static_cast<char>(kNewObj));
        return;
      }
      default: {
        std::array<char, 8> hex{};
        std::snprintf(hex.data(), hex.size(), "0x%02x", op);
        throw PickleError("its data.pkl has opcode " + std::string(hex.data()) + " at byte " +
                              std::to_string(op_at_) +
                              ", which torch.save does not write for a state dict",
                          kResave);
      }
    }
  }

  std::string_view in_;
  std::uint64_t max_storage_bytes_;
  std::size_t pos_ = 0;
  std::size_t op_at_ = 0;
  std::string out_;
  std::vector<Value> stack_;
  std::vector<std::size_t> marks_;
  std::vector<std::optional<Value>> memo_;
  std::uint64_t puts_ = 0;
  std::vector<Object> objects_;
};

}  // namespace

std::string rewrite_state_pickle(std::string_view pickle, std::uint64_t max_storage_bytes) {
  return Rewriter(pickle, max_storage_bytes).run();
}

}  // namespace runner::weights::detail
