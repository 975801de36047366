// A small, strict reader of Python pickles of plain data: what PyTorch's Flight Recorder
// writes (protocol 2: dicts, lists, tuples, str, int, float, bool, None) and, when asked, the
// numpy arrays of mmdet3d's info files. It runs the pickle machine for these opcodes only:
//   PROTO FRAME STOP MARK POP POP_MARK DUP EMPTY_DICT EMPTY_LIST EMPTY_TUPLE TUPLE TUPLE1 TUPLE2
//   TUPLE3 LIST DICT APPEND APPENDS SETITEM SETITEMS PUT BINPUT LONG_BINPUT GET BINGET
//   LONG_BINGET MEMOIZE NONE NEWTRUE NEWFALSE INT BININT BININT1 BININT2 LONG1 BINFLOAT
//   BINUNICODE SHORT_BINUNICODE BINUNICODE8 BINBYTES SHORT_BINBYTES BINSTRING SHORT_BINSTRING
// and rejects every other one (GLOBAL, REDUCE, BUILD, ...: the opcodes that import and call
// code) with an error naming the opcode and its byte offset. Nothing is executed.
//
// With PickleOptions::numpy, GLOBAL, STACK_GLOBAL, REDUCE and BUILD are read too, but only for a
// fixed list of globals, each interpreted by petrsim on data (never imported, never called):
//   numpy.core.multiarray._reconstruct + numpy.ndarray + numpy.dtype   (arrays, any protocol)
//   numpy.core.numeric._frombuffer                                     (arrays, protocol 5)
//   numpy.core.multiarray.scalar                                       (numpy scalars)
//   _codecs.encode(str, 'latin1') and bytes()                          (how protocol 2 writes
//                                                                       bytes, e.g. array data)
//   collections.OrderedDict()                                          (an empty dict, then
//                                                                       SETITEM(S): a kDict)
// with numpy 2's numpy._core.* names as aliases, and BINBYTES8 and BYTEARRAY8 (protocol 5's
// in-band array buffers). Any other global (os.system, builtins.eval, ...) is refused with its
// module.name and byte offset; so are the numpy dtypes petrsim does not read (structured,
// datetime, complex, float16, big-endian).
//
// With PickleOptions::torch as well, the CPU tensors plain pickle.dump writes (what Far3D's
// Argoverse 2 info converter stores through mmcv.dump):
//   torch._utils._rebuild_tensor_v2(storage, offset, size, stride, requires_grad, hooks)
//   torch.storage._load_from_bytes(bytes)  (the storage as a legacy torch.save stream: its
//                                           pickles are read by this machine too, its
//                                           persistent id must name a torch.*Storage type)
// become plain kNumpyArray nodes of the tensor's dtype (C-contiguous tensors only). And
// PickleOptions::opaque_globals names classes and functions whose objects are read as inert
// kOpaque nodes (GLOBAL, then REDUCE, NEWOBJ or BUILD of it): their arguments are parsed as data
// and dropped, nothing is imported or called. A caller lists only what it never reads (Far3D's
// camera poses, paths and pandas series beside the annotations).
//
// Limits against hostile files: every length is checked against the bytes left; integers
// wider than 64 bits are refused; values are nodes of one arena (a memo reference shares the
// node, as Python shares the object, and a cycle costs nothing), at most kPickleNodesMax of
// them, so memory stays below about 160 bytes per byte of input and 2.7 GiB in all. Derived
// values are copies, not shares: an array's data (BUILD, _frombuffer), protocol 2's bytes, a
// numpy scalar, an object array's items, a record's length-only list. A memoized buffer or state
// can be fetched again for each copy, so every copied byte is charged to a budget of 4 bytes per
// input byte plus 1 MiB, and a file that needs more (300 arrays built from one shared buffer) is
// refused with its byte offset. An array's shape must be at most kNumpyDimsMax dims
// whose product times the item size is exactly its data length. The machine itself never
// recurses. A reader of the tree must not recurse without a limit either: a list may contain
// itself; the Flight Recorder converter reads a fixed shape and charges every value it copies
// to a budget proportional to the file (flight_recorder.cc).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/error.h"

namespace petrsim {

// Bad input: the message names the file, the byte offset and what was wrong.
class PickleError : public ScenarioError {
 public:
  PickleError(const std::string& message, uint64_t offset) : ScenarioError(message), offset_(offset) {}
  uint64_t offset() const { return offset_; }

 private:
  uint64_t offset_;
};

inline constexpr int kPickleDepthMax = 64;  // JSON nesting refused beyond this (flight_recorder.cc)
inline constexpr uint64_t kPickleNodesMax = uint64_t{1} << 24;
// In the error of a record changed after it was handed to PickleOptions::on_record: a caller that can read the file
// without on_record (as a whole tree) does so then.
inline constexpr std::string_view kRecordChangedAfterHandOver = "changes a record after it was added to its list";
inline constexpr size_t kNumpyDimsMax = 32;  // numpy 1.x's NPY_MAXDIMS

// A numpy element type as petrsim reads it (always little-endian or byte-order free).
struct NumpyDtype {
  // 'b' bool, 'i' signed and 'u' unsigned integer, 'f' float32/float64, 'U' str (UCS-4),
  // 'S' bytes, 'O' Python objects (the items are pickled values); 0 when unset.
  char kind = 0;
  uint32_t itemsize = 0;  // bytes per element (8 for 'O', a pointer's size in numpy)
  // numpy's spelling, e.g. "<f8", "|b1", "<U10", "|O".
  std::string Name() const;
};

struct PickleNode {
  enum class Type {
    kNone,
    kBool,
    kInt,
    kFloat,
    kString,
    kBytes,
    kList,
    kTuple,
    kDict,
    // Only with PickleOptions::numpy:
    kNumpyArray,   // dtype, shape; elements in `text` (C order, little-endian), or `items` for 'O'
    kNumpyScalar,  // dtype; the element's bytes in `text`
    kNumpyDtype,   // dtype
    kGlobal,       // one of the allowed globals: `text` is its "module.name"
    kOpaque,       // an object of one of PickleOptions::opaque_globals: `text` is its "module.name"
    // Only with PickleOptions::record_lists: a value the caller said it never reads.
    kDropped,
  };
  Type type = Type::kNone;
  bool boolean = false;
  bool built = false;   // kNumpyArray, kNumpyDtype: BUILD has set the state
  bool latin1 = false;  // kString: read from the file with every character below U+0100
  bool handed = false;  // part of a record handed to PickleOptions::on_record: no opcode may change it any more
  int64_t integer = 0;  // kInt; kGlobal: which one (pickle_numpy_globals.cc)
  double real = 0;
  std::string text;                                          // kString (UTF-8 as stored), kBytes, numpy element bytes
  std::vector<PickleNode*> items;                            // kList, kTuple, kNumpyArray of dtype 'O'
  std::vector<std::pair<PickleNode*, PickleNode*>> entries;  // kDict, in insertion order
  NumpyDtype dtype;                                          // kNumpyArray, kNumpyScalar, kNumpyDtype
  std::vector<int64_t> shape;                                // kNumpyArray

  // Dict lookup by string key (the last one wins, as in Python); null when absent or not a dict.
  const PickleNode* Get(std::string_view key) const;
  bool is_sequence() const { return type == Type::kList || type == Type::kTuple; }
  std::string TypeName() const;
};

struct PickleDocument {
  const PickleNode* root = nullptr;
  // Set when the stream ended early or went wrong after some values were built: the error
  // (file, byte offset, what), and `root` is what could be salvaged (pending items of open
  // MARKs are added to the container below them), or null when nothing could.
  std::optional<std::string> partial;
  uint64_t partial_offset = 0;
  std::vector<std::unique_ptr<PickleNode>> arena;
  // Record mode: the dropped values stepped over unbuilt, and those the machine parsed instead.
  uint64_t skipped_values = 0;
  uint64_t skip_fallbacks = 0;
  bool skip_restarted = false;  // read twice: the second time without skipping (pickle_skip.cc)
  // Record mode: read again with the memo scan first (PickleOptions::memo_scan_first), as the
  // file read back a memoized value the one pass had not kept.
  bool memo_rescanned = false;
};

struct PickleOptions {
  // Read numpy arrays, dtypes and scalars through the globals listed above. Off: every global
  // is refused (what Flight Recorder dumps get).
  bool numpy = false;
  // With numpy: torch tensors too (see above), as numpy arrays of their dtype.
  bool torch = false;
  // With numpy: globals read as inert kOpaque objects, each an exact "module.name" or a prefix
  // ending in '.' ("pandas." covers every pandas module). Empty: none.
  std::vector<std::string> opaque_globals;
  // Return the partial document when the stream breaks after the first container was opened.
  bool salvage = true;
  // Record mode, for big files of records such as mmdet3d's info files ({'infos': [info, ...],
  // ...}): the items of the lists stored under these keys of the top-level dict are records,
  // dicts of which only `record_keys` are kept; the values of `record_length_keys` keep only
  // their length (a list of kDropped items) and every other value becomes one shared kDropped
  // node. Memory then follows what the caller keeps, not the file: the memo keeps only what is
  // cheap to keep (see memo_scan_first), and the reader reuses the nodes nothing can reach any
  // more; nothing is salvaged (see on_record). Empty: every value is kept.
  std::vector<std::string> record_lists;
  // Record mode for a top-level list too: its items are records (mmdet3d's older info files, a
  // bare list of infos). Needs record_lists to be non-empty (record mode on).
  bool record_top_list = false;
  std::vector<std::string> record_keys;
  std::vector<std::string> record_length_keys;
  // Record mode: at most this many records in one record list (0: no limit), refused as the list
  // grows past it, before the caller builds anything of them; `record_items_why` ends the error
  // (what the limit is for, what the records would cost).
  uint64_t record_items_max = 0;
  std::string record_items_why;
  // Record mode: the value under a key the caller drops is stepped over without being built
  // (pickle_skip.cc). Its structure is checked as the machine checks it (opcodes, lengths within
  // the file, the stack and its MARKs, memo indices stored before they are read, the allowed
  // globals), not its content: what an allowed global would make of its arguments (an array's
  // shape against its data, a dtype's name, protocol 2's Latin-1 text) is not read, as nothing
  // reads that value. Where the skip cannot follow a value exactly as the machine runs it
  // (a global named for the first time, a memoized value read back later, a shared list added
  // to, an opcode it does not follow) the machine parses it, so Python's pickles read the same
  // either way. A hand-made pickle that moves a record's value elsewhere after it is complete
  // (a tuple of the record's key and value, say) is read a second time without skipping. Off:
  // every value is built, then dropped.
  bool skip_dropped = true;
  // Record mode with skip_dropped: how the memo is kept. Off (one pass): a memoized str is kept as
  // its offset in the input (made again when it is read back), a global, fixed-size dtype or
  // CPython's singleton bytes as it is; a container, an array, other bytes are not kept (but from a
  // dropped value the skip could not follow to its record's end). What the skip stepped over is
  // found again when a value the machine builds reads it back: a str made from its bytes, anything
  // else by running that dropped value again, once, keeping all it memoizes. A read back of anything
  // else (a container a record built, a record itself, an index stored twice, an error in the content
  // of a dropped value run again) reads the file again from the start with this on
  // (PickleDocument::memo_rescanned), records handed over before not again. The one pass may step
  // over a dropped value whose memoized parts only other dropped values read back, which the scan
  // builds: an error in its content (a str that is not UTF-8, say) is then not seen. On (and always
  // without skip_dropped): a first pass over the opcodes finds the memo indices ever read back, and
  // only those are kept.
  bool memo_scan_first = false;
  // Record mode: each record is handed here as soon as it is added to its record list (APPEND or APPENDS, the
  // top-level list's too), in file order, with its index in that list; the list then keeps a kDropped node in its
  // place (its length stays right), so the record's nodes can be reused. The node is valid only during the call,
  // which must not throw (keep an error and raise it after ParsePickle). Empty: records stay in their lists.
  //
  // The records are those the list would hold without it. A record the file memoizes and reads back (the same
  // dict twice) stays whole for the later reads: the memo keeps it (one read back only once until that read). Memory
  // follows the largest batch of records waiting on the stack for their APPENDS (Python writes 1000 at a time) and the
  // values the file reads back more than once (keys, shared strings), not the record count. A hand-made file that
  // changes a record through the memo after it was added is refused (PickleError "... changes a record after it was
  // added to its list"): the caller has read it already. Records handed over before a read again (without
  // skipping, skip_dropped, or with the memo scan first, memo_scan_first) are not handed over again.
  //
  // With `salvage` too, a file cut short salvages as tree mode does: the records still waiting on the stack (a
  // half-built last one with the pairs tree mode's salvage gives it) are handed over after the error, in order,
  // so that the records handed over in all are the items of tree mode's salvaged record list, each pruned as
  // above; the document holds the other top-level values and the error (partial, partial_offset) tree mode's
  // salvage gives. One exception, with skip_dropped: a cut inside a value the reader was stepping over (a dropped
  // or length-only one) leaves that key out of the last record, as that value was never built. Without
  // on_record, record mode salvages nothing.
  std::function<void(const PickleNode& record, uint64_t index)> on_record;
  // Called with (bytes read, file size) every kPickleProgressBytes of input (a progress bar). May be
  // empty.
  std::function<void(uint64_t done, uint64_t total)> progress;
  // Called now and then (every kPickleProgressBytes) with an offset the reader has passed (values
  // are copies, never views): a caller that mapped the file can drop the pages below it, so memory
  // follows what is kept, not the file. They must read the same again if needed: record mode's one
  // pass makes a memoized str again from its bytes, and runs a dropped value again, when a later
  // value reads it back (a file mapping's pages are read from the file again). The offset starts
  // over when record mode reads the input again (memo_scan_first's first pass, a read again). May
  // be empty.
  std::function<void(uint64_t done)> release;
  // Called by the second thread of record mode's first pass, which a file of 64 MiB or more gets
  // on a machine with two cores or more (its second half is scanned beside the first), with a range [from, to) of the
  // input it has passed: as `release`, for that range. Called beside `release`, from another thread. May be empty.
  std::function<void(uint64_t from, uint64_t to)> release_range;
};
inline constexpr uint64_t kPickleProgressBytes = uint64_t{1} << 22;

// Parses `bytes` (the whole file). `display_name` (the path) starts every error message.
// Throws PickleError when nothing usable was read (not a pickle, an unsupported opcode before
// any value, ...). With `salvage`, an error after the first container was opened returns the
// partial document instead of throwing.
PickleDocument ParsePickle(std::string_view bytes, const std::string& display_name, bool salvage = true);
PickleDocument ParsePickle(std::string_view bytes, const std::string& display_name, const PickleOptions& options);

// Reading numpy values (kNumpyArray or kNumpyScalar; `index` in C order, < NumpyCount). The
// caller checks the kind: Float for 'f', 'i', 'u', 'b'; Int for 'i', 'u', 'b' (a uint64 above
// INT64_MAX reads as -1: callers check NumpyIntFits first and refuse it, NumpyUint64 gives its
// value for the message); String for 'U' (as UTF-8) and 'S', without numpy's trailing NUL padding.
uint64_t NumpyCount(const PickleNode& array);
double NumpyFloat(const PickleNode& node, uint64_t index);
int64_t NumpyInt(const PickleNode& node, uint64_t index);
bool NumpyIntFits(const PickleNode& node, uint64_t index);     // false: a uint64 above INT64_MAX
uint64_t NumpyUint64(const PickleNode& node, uint64_t index);  // the element as uint64 ('u' only)
std::string NumpyString(const PickleNode& node, uint64_t index);
// For error messages: "float64 array of shape (3, 7)", "str (<U10) array of shape (5,)",
// "int 3", "str 'abc'", "list of 2 items", or the type name.
std::string DescribePickleValue(const PickleNode& node);

}  // namespace petrsim
