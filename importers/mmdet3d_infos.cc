// mmdet3d info pickles to an imported sub-dataset; see mmdet3d_infos.h.
#include "importers/mmdet3d_infos.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <memory>
#include <optional>
#include <unordered_map>

#include "base/assert.h"
#include "base/error.h"
#include "base/host_memory.h"
#include "base/input_files.h"
#include "base/utf8.h"
#include "formats/pickle/pickle.h"

namespace petrsim {
namespace {

using Type = PickleNode::Type;

// The info keys the importer reads; the reader drops every other value while it parses (the
// cameras, sweeps' details and 2D annotations are most of a real file).
const std::vector<std::string>& KeptKeys() {
  static const std::vector<std::string> keys = {"token", "timestamp", "scene_token", "scene_name", "gt_boxes",
                                                "gt_names", "num_lidar_pts", "num_radar_pts", "valid_flag",
                                                // Far3D's Argoverse 2 infos:
                                                "scene_id", "lidar_timestamp_ns", "gt3d_infos"};
  return keys;
}

// What Far3D's Argoverse 2 converter stores beside the annotations and petrsim never reads
// (create_av2_infos.py:56-97): av2's SE3 poses, the images' pathlib paths and the distortion as a
// pandas Series. The pickle reader parses them as inert objects, never importing anything.
const std::vector<std::string>& Av2OpaqueGlobals() {
  static const std::vector<std::string> globals = {"av2.",    "pathlib.PosixPath", "pathlib.PurePosixPath",
                                                   "pandas.", "builtins.slice",    "__builtin__.slice"};
  return globals;
}

// Where a frame's boxes are and what the dataset class reads of them: mmdet3d's NuScenesDataset
// reads the info itself, Far3D's Argoverse2Dataset its gt3d_infos dict.
struct BoxKeys {
  const char* prefix;         // before each key in messages: "" or "gt3d_infos."
  const char* points;         // the lidar point count: num_lidar_pts or num_interior_pts
  const char* no_gt;          // said when gt_boxes or gt_names are missing
  const char* no_valid_flag;  // said when valid_flag is missing but read
  const char* no_points;      // said when the point count is missing but read
};
constexpr BoxKeys kNuScenesBoxes = {
    "", "num_lidar_pts", " (a test-split info file has no annotations; import the train and val infos)",
    "missing key 'valid_flag' (mmdet3d reads it with use_valid_flag; "
    "import with --no-valid-flag if your config sets use_valid_flag=False)",
    "missing key 'num_lidar_pts' (mmdet3d reads it with use_valid_flag=False: a box is valid when "
    "num_lidar_pts > 0)"};
constexpr BoxKeys kAv2Boxes = {
    "gt3d_infos.", "num_interior_pts", "",
    "missing key 'valid_flag' (Far3D's Argoverse2Dataset.get_ann_info reads gt3d_infos['valid_flag'] with "
    "use_valid_flag, argoverse2_dataset.py:198-199, and its converter never writes it: Far3D's configs set "
    "use_valid_flag=False)",
    "missing key 'num_interior_pts' (Far3D's Argoverse2Dataset.get_ann_info reads it with use_valid_flag=False: a "
    "box is valid when num_interior_pts > 0, argoverse2_dataset.py:200-201)"};

std::string StemOf(const std::string& path) {
  std::string name = path.substr(path.find_last_of('/') + 1);
  if (name.size() > 4 && name.compare(name.size() - 4, 4, ".pkl") == 0) name.resize(name.size() - 4);
  return name;
}

class InfoReader {
 public:
  InfoReader(const std::string& file, uint64_t file_bytes, const Mmdet3dInfosOptions& options, ImportedSubDataset& out)
      : file_(file), file_bytes_(file_bytes), options_(options), out_(out) {}

  bool av2() const { return av2_; }

  // One info as the pickle reader hands it over (PickleOptions::on_record), in file order; the first decides the
  // format. An error is kept for ReadRoot, which says first what is wrong with the top level, as a whole read does.
  // A second record list (a hand-made file with both 'infos' and 'data_list') is noted, not read.
  void ReadRecord(const PickleNode& info, uint64_t i) {
    if (i == 0 && records_ > 0) second_list_ = true;
    if (second_list_) return;
    ++records_;
    if (info_error_) return;
    try {
      if (i == 0) {
        av2_ = info.type == Type::kDict && info.Get("token") == nullptr &&
               (info.Get("scene_id") != nullptr || info.Get("gt3d_infos") != nullptr);
      }
      if (av2_) {
        ReadAv2Info(info, i);
      } else {
        ReadInfo(info, i);
      }
    } catch (const ScenarioError&) {
      info_error_ = std::current_exception();
    }
  }
  // Whether every info of the file's list was handed to ReadRecord, and only those: else the file is read again as a
  // whole tree (a hand-made file with two record lists, or whose 'infos' list the reader did not know as one).
  bool ReadAsRecords(const PickleNode& root) const {
    if (second_list_) return false;
    const PickleNode* infos = root.type == Type::kList ? &root : root.type == Type::kDict ? root.Get("infos") : nullptr;
    if (infos == nullptr || infos->type != Type::kList) return true;  // ReadRoot says what is wrong, before any info
    return records_ == infos->items.size() &&
           std::all_of(infos->items.begin(), infos->items.end(),
                       [](const PickleNode* item) { return item->type == Type::kDropped; });
  }

  // The top level, after the infos were read as they came (ReadRecord), or with them (`records_read` false).
  void ReadRoot(const PickleNode& root, bool records_read = false) {
    const PickleNode* infos = nullptr;
    if (root.type == Type::kList) {
      // The older format: the infos without the dict around them.
      infos = &root;
      out_.warnings.push_back(
          "the infos are a bare list, without the dict(infos=..., metadata=...) around them (the older "
          "format, which mmdet3d's Custom3DDataset.load_annotations reads; its NuScenesDataset reads "
          "data['infos'] and data['metadata']['version'], so check that your dataset class reads a list)");
    } else if (root.type != Type::kDict) {
      Fail("top level", fmt::format("expected a dict with 'infos' and 'metadata' (an mmdet3d 1.0 info file) or a "
                                    "list of infos (the older format), found a {}",
                                    DescribePickleValue(root)));
    } else {
      infos = root.Get("infos");
    }
    if (infos == nullptr) {
      if (root.Get("data_list") != nullptr) {
        Fail("top level",
             "this is an mmdet3d 1.x info file ('data_list', 'metainfo'); petrsim reads "
             "the mmdet3d 1.0 format StreamPETR trains on ('infos', 'metadata'), written "
             "by mmdet3d 1.0's or StreamPETR's tools/create_data.py");
      }
      std::string keys;
      for (const auto& [key, value] : root.entries) {
        if (keys.size() > 80) break;
        keys += (keys.empty() ? "'" : ", '") + (key->type == Type::kString ? key->text : key->TypeName()) + "'";
      }
      Fail("top level", fmt::format("no key 'infos' (found {})", keys.empty() ? "an empty dict" : keys));
    }
    if (infos->type != Type::kList)
      Fail("infos", fmt::format("expected a list, found a {}", DescribePickleValue(*infos)));
    if (const PickleNode* metadata = root.Get("metadata"); metadata != nullptr) {
      if (const PickleNode* version = metadata->Get("version"); version != nullptr && version->type == Type::kString) {
        out_.version = version->text;
      }
    }
    if (infos->items.empty()) Fail("infos", "the list is empty (no frame to import)");
    if (records_read) {
      if (info_error_) std::rethrow_exception(info_error_);
      PETRSIM_ASSERT(out_.frames.size() == infos->items.size());  // one frame per info handed over (ReadAsRecords)
    } else {
      out_.frames.reserve(infos->items.size());
      for (size_t i = 0; i < infos->items.size(); ++i) ReadRecord(*infos->items[i], i);
      if (info_error_) std::rethrow_exception(info_error_);
    }
    if (infos_without_lidar_pts_ > 0) {
      out_.warnings.push_back(fmt::format(
          "{} info(s) without 'num_lidar_pts' (the first: infos[{}]): mmdet3d reads it only with "
          "use_valid_flag=False, so their boxes count as valid by their stored valid_flag; the scenario gives "
          "such a box 1 lidar point when its flag is true and none when false, so --set "
          "filters.use_valid_flag=false on it is not what mmdet3d would do (it needs num_lidar_pts then)",
          infos_without_lidar_pts_, first_info_without_lidar_pts_));
    }
  }

 private:
  [[noreturn]] void Fail(const std::string& where, const std::string& what) const {
    throw ScenarioError(fmt::format("{}: {}: {}", file_, where, what));
  }
  static std::string Where(size_t i, const char* key) { return fmt::format("infos[{}].{}", i, key); }

  const PickleNode& Need(const PickleNode& info, size_t i, const char* key, const char* why = "",
                         const char* prefix = "") const {
    const PickleNode* value = info.Get(key);
    if (value == nullptr) {
      std::string where = fmt::format("infos[{}]", i);
      if (*prefix != 0) where += "." + std::string(prefix, std::strlen(prefix) - 1);
      Fail(where, fmt::format("missing key '{}'{}", key, why));
    }
    return *value;
  }
  static std::string Where(size_t i, const BoxKeys& keys, const char* key) {
    return fmt::format("infos[{}].{}{}", i, keys.prefix, key);
  }

  static bool IsArray(const PickleNode& node) { return node.type == Type::kNumpyArray; }
  static bool Empty1D(const PickleNode& node) {
    return IsArray(node) && NumpyCount(node) == 0 && node.shape.size() <= 1;
  }

  void ReadInfo(const PickleNode& info, size_t i) {
    if (info.type != Type::kDict) {
      Fail(fmt::format("infos[{}]", i), fmt::format("expected a dict, found a {}", DescribePickleValue(info)));
    }
    ImportedFrame frame;
    const PickleNode& token = Need(info, i, "token");
    if (token.type != Type::kString)
      Fail(Where(i, "token"), fmt::format("expected a str, found {}", DescribePickleValue(token)));
    frame.token = token.text;
    const PickleNode& timestamp = Need(info, i, "timestamp");
    if (timestamp.type == Type::kInt) {
      frame.timestamp = timestamp.integer;
    } else if (timestamp.type == Type::kNumpyScalar && (timestamp.dtype.kind == 'i' || timestamp.dtype.kind == 'u')) {
      if (!NumpyIntFits(timestamp, 0)) {
        Fail(Where(i, "timestamp"), fmt::format("a numpy uint64 timestamp {} above the int64 range (microseconds "
                                                "since 1970 fit in int64)",
                                                NumpyUint64(timestamp, 0)));
      }
      frame.timestamp = NumpyInt(timestamp, 0);
    } else {
      Fail(Where(i, "timestamp"),
           fmt::format("expected an int (microseconds), found {}", DescribePickleValue(timestamp)));
    }
    const PickleNode& sweeps = Need(info, i, "sweeps", " (StreamPETR starts a scene at every frame without sweeps)");
    if (!sweeps.is_sequence())
      Fail(Where(i, "sweeps"), fmt::format("expected a list, found {}", DescribePickleValue(sweeps)));
    frame.sweeps = static_cast<uint32_t>(std::min<size_t>(sweeps.items.size(), UINT32_MAX));
    if (const PickleNode* scene_token = info.Get("scene_token"); scene_token != nullptr) {
      if (scene_token->type != Type::kString) {
        Fail(Where(i, "scene_token"), fmt::format("expected a str, found {}", DescribePickleValue(*scene_token)));
      }
      frame.scene_token = scene_token->text;
    }
    // Some converters (BEVDet's) store the nuScenes scene name too: the scenes are named by it.
    if (const PickleNode* scene_name = info.Get("scene_name"); scene_name != nullptr) {
      if (scene_name->type != Type::kString) {
        Fail(Where(i, "scene_name"), fmt::format("expected a str, found {}", DescribePickleValue(*scene_name)));
      }
      frame.scene_name = scene_name->text;
    }
    ReadBoxes(info, i, kNuScenesBoxes, frame);
    out_.frames.push_back(std::move(frame));
  }

  // One info of Far3D's Argoverse 2 file, read as Argoverse2Dataset(T) reads it
  // (argoverse2_dataset.py:182-221, argoverse2_dataset_t.py:165-181): scene_id, lidar_timestamp_ns
  // and the boxes of gt3d_infos.
  void ReadAv2Info(const PickleNode& info, size_t i) {
    if (info.type != Type::kDict) {
      Fail(fmt::format("infos[{}]", i), fmt::format("expected a dict, found a {}", DescribePickleValue(info)));
    }
    ImportedFrame frame;
    const PickleNode& scene =
        Need(info, i, "scene_id", " (Far3D's Argoverse2DatasetT starts a sequence wherever it changes)");
    if (scene.type != Type::kString)
      Fail(Where(i, "scene_id"), fmt::format("expected a str (the log id), found {}", DescribePickleValue(scene)));
    frame.scene_token = scene.text;
    const PickleNode& timestamp = Need(info, i, "lidar_timestamp_ns");
    if (timestamp.type == Type::kInt) {
      frame.timestamp = timestamp.integer;
    } else if (timestamp.type == Type::kNumpyScalar && (timestamp.dtype.kind == 'i' || timestamp.dtype.kind == 'u') &&
               NumpyIntFits(timestamp, 0)) {
      frame.timestamp = NumpyInt(timestamp, 0);
    } else {
      Fail(Where(i, "lidar_timestamp_ns"),
           fmt::format("expected an int (nanoseconds) in the int64 range, found {}", DescribePickleValue(timestamp)));
    }
    frame.token = fmt::format("{}/{}", frame.scene_token, frame.timestamp);
    frame.sweeps = 1;  // not read: Far3D's scenes follow scene_id
    const PickleNode& gt = Need(info, i, "gt3d_infos",
                                " (Far3D's converter writes no annotations for the test split, "
                                "create_av2_infos.py:99-106; import the train and val infos)");
    if (gt.type != Type::kDict) {
      Fail(Where(i, "gt3d_infos"),
           fmt::format("expected a dict (gt_boxes, gt_names, num_interior_pts), found {}", DescribePickleValue(gt)));
    }
    ReadBoxes(gt, i, kAv2Boxes, frame);
    out_.frames.push_back(std::move(frame));
  }

  // The arrays of one info's boxes, as ReadBoxes found them.
  struct BoxArrays {
    const PickleNode* boxes = nullptr;  // gt_boxes
    const PickleNode* names = nullptr;  // gt_names
    const PickleNode* lidar = nullptr;  // the point count (keys.points), when present
    const PickleNode* radar = nullptr;  // num_radar_pts, when present
    const PickleNode* valid = nullptr;  // valid_flag, when present
    uint64_t n = 0;                     // boxes
    uint64_t columns = 0;               // gt_boxes' columns (7 or more)
  };

  void ReadBoxes(const PickleNode& info, size_t i, const BoxKeys& keys, ImportedFrame& frame) {
    const char* no_gt = keys.no_gt;
    auto where = [&](const char* key) { return Where(i, keys, key); };
    BoxArrays arrays;
    const PickleNode& boxes = Need(info, i, "gt_boxes", no_gt, keys.prefix);
    arrays.boxes = &boxes;
    if (IsArray(boxes) && boxes.dtype.kind == 'f' && boxes.shape.size() == 2 && boxes.shape[1] >= 7) {
      arrays.n = static_cast<uint64_t>(boxes.shape[0]);
      arrays.columns = static_cast<uint64_t>(boxes.shape[1]);
    } else if (!Empty1D(boxes)) {
      Fail(where("gt_boxes"),
           fmt::format("expected a float array of shape (N, 7) (x, y, z, dx, dy, "
                       "dz, yaw){}, found {}",
                       av2_ ? ", a torch tensor as Far3D's converter writes it" : "", DescribePickleValue(boxes)));
    }
    const uint64_t n = arrays.n;
    const PickleNode& names = Need(info, i, "gt_names", no_gt, keys.prefix);
    arrays.names = &names;
    // What mmdet3d's NuScenesDataset.get_ann_info reads: valid_flag with use_valid_flag, else
    // num_lidar_pts (> 0); num_radar_pts never (the converter's valid_flag counts it). Each may
    // be absent when mmdet3d does not read it.
    const auto dict_where = [&] {
      return *keys.prefix == 0 ? fmt::format("infos[{}]", i)
                               : fmt::format("infos[{}].{}", i, std::string(keys.prefix, std::strlen(keys.prefix) - 1));
    };
    arrays.valid = info.Get("valid_flag");
    if (arrays.valid == nullptr && options_.use_valid_flag) Fail(dict_where(), keys.no_valid_flag);
    arrays.lidar = info.Get(keys.points);
    if (arrays.lidar == nullptr && !options_.use_valid_flag) Fail(dict_where(), keys.no_points);
    if (arrays.lidar == nullptr && infos_without_lidar_pts_++ == 0) first_info_without_lidar_pts_ = i;
    arrays.radar = info.Get("num_radar_pts");
    if (IsArray(names) && names.dtype.kind == 'S' && !(n == 0 && Empty1D(names))) {
      // mmdet3d compares the names with its str class names: b'car' never matches 'car'.
      Fail(where("gt_names"), fmt::format("expected a str array ('<U..') or an object array of str, found a bytes "
                                          "dtype ({}): mmdet3d compares names as str, so bytes names match no class",
                                          DescribePickleValue(names)));
    }
    CheckPerBox(names, n, i, keys, "gt_names", "UO", "a str array");
    if (arrays.lidar != nullptr) CheckPerBox(*arrays.lidar, n, i, keys, keys.points, "iu", "an int array");
    if (arrays.radar != nullptr) CheckPerBox(*arrays.radar, n, i, keys, "num_radar_pts", "iu", "an int array");
    if (arrays.valid != nullptr) CheckPerBox(*arrays.valid, n, i, keys, "valid_flag", "b", "a bool array");

    // An array shared between infos (one memo entry fetched again) costs the file a few bytes
    // but the dataset its rows once per info: a real box costs the file at least its 7 float32
    // of gt_boxes (28 bytes), so more boxes than one per kFileBytesPerBox bytes are refused.
    if (n > 0 && out_.boxes.size() + n > MaxBoxes()) {
      Fail(where("gt_boxes"), fmt::format("the infos so far hold {} boxes, more than a {}-byte file can hold (at "
                                          "most {}, one per {} bytes; a real box costs at least 28 bytes of "
                                          "gt_boxes): are arrays shared between infos?",
                                          out_.boxes.size() + n, file_bytes_, MaxBoxes(), kFileBytesPerBox));
    }
    AppendBoxes(arrays, i, keys, frame);
  }

  // One array per box (`n` long) of `kinds`. An empty frame's arrays come out of np.array([]) as
  // float64: any dtype is fine at length 0.
  // `array` (infos[i].<key>) holds one value per box, of a dtype kind in `kinds`; where it is is
  // only written out for an error.
  void CheckPerBox(const PickleNode& array, uint64_t n, size_t i, const BoxKeys& keys, const char* key,
                   const char* kinds, const char* expected) const {
    if (n == 0 && Empty1D(array)) return;
    // Far3D's converter stores gt_names as a list of str (create_av2_infos.py:153-154).
    if (av2_ && array.is_sequence() && std::strcmp(kinds, "UO") == 0) {
      if (array.items.size() != n) {
        Fail(Where(i, keys, key),
             fmt::format("expected a list of {} str (one per gt_boxes row), found {}", n, DescribePickleValue(array)));
      }
      return;
    }
    const bool kind_ok = IsArray(array) && std::strchr(kinds, array.dtype.kind) != nullptr && array.dtype.kind != 0;
    if (!kind_ok || array.shape.size() != 1 || static_cast<uint64_t>(array.shape[0]) != n) {
      Fail(Where(i, keys, key), fmt::format("expected {} of shape ({},) (one per gt_boxes row), found {}", expected, n,
                                            DescribePickleValue(array)));
    }
  }

  // The boxes of checked arrays, appended to the dataset's and named as the frame's range.
  void AppendBoxes(const BoxArrays& arrays, size_t i, const BoxKeys& keys, ImportedFrame& frame) {
    auto where = [&](const char* key) { return Where(i, keys, key); };
    const PickleNode* lidar = arrays.lidar;
    const PickleNode* radar = arrays.radar;
    const PickleNode* valid = arrays.valid;
    frame.box_begin = static_cast<uint32_t>(out_.boxes.size());
    for (uint64_t b = 0; b < arrays.n; ++b) {
      ImportedBox box;
      box.class_index = ClassIndex(*arrays.names, b, i, keys);
      const double x = NumpyFloat(*arrays.boxes, b * arrays.columns);
      const double y = NumpyFloat(*arrays.boxes, b * arrays.columns + 1);
      box.x = static_cast<float>(x);
      box.y = static_cast<float>(y);
      if (!std::isfinite(box.x) || !std::isfinite(box.y)) {
        Fail(fmt::format("{}[{}]", where("gt_boxes"), b),
             fmt::format("expected a finite BEV centre, found ({}, {})", x, y));
      }
      if (lidar != nullptr) {
        box.num_lidar_pts = Count(*lidar, b, i, keys, keys.points);
      } else {
        // ReadBoxes refuses an info with neither: valid_flag is read when the point count is not.
        PETRSIM_ASSERT(valid != nullptr);
        box.num_lidar_pts = NumpyInt(*valid, b) != 0 ? 1 : 0;  // only the stored flag is known
      }
      box.num_radar_pts = radar != nullptr ? Count(*radar, b, i, keys, "num_radar_pts") : 0;
      if (valid != nullptr) {
        const bool flag = NumpyInt(*valid, b) != 0;
        const bool counted = uint64_t{box.num_lidar_pts} + box.num_radar_pts > 0;
        if (flag != counted) box.valid_flag = flag ? 1 : 0;
      }
      out_.boxes.push_back(box);
    }
    if (out_.boxes.size() > UINT32_MAX) Fail("infos", "more than 2^32 boxes");
    frame.box_end = static_cast<uint32_t>(out_.boxes.size());
    PETRSIM_ASSERT(frame.box_end - frame.box_begin == arrays.n);  // one box per gt_boxes row
  }

  static constexpr uint64_t kFileBytesPerBox = 16;
  uint64_t MaxBoxes() const { return file_bytes_ / kFileBytesPerBox; }

  // Box b's count in `array` (infos[i].<key>); where it is is only written out for an error.
  uint32_t Count(const PickleNode& array, uint64_t b, size_t i, const BoxKeys& keys, const char* key) const {
    if (!NumpyIntFits(array, b)) {
      Fail(fmt::format("{}[{}]", Where(i, keys, key), b),
           fmt::format("expected a count in [0, 2^32), found {}", NumpyUint64(array, b)));
    }
    const int64_t value = NumpyInt(array, b);
    if (value < 0 || value > int64_t{UINT32_MAX}) {
      Fail(fmt::format("{}[{}]", Where(i, keys, key), b),
           fmt::format("expected a count in [0, 2^32), found {}", value));
    }
    return static_cast<uint32_t>(value);
  }

  uint32_t ClassIndex(const PickleNode& names, uint64_t b, size_t i, const BoxKeys& keys) {
    std::string name;
    if (names.dtype.kind == 'O' || names.is_sequence()) {
      const PickleNode& item = *names.items[b];
      if (item.type != Type::kString) {
        Fail(fmt::format("{}[{}]", Where(i, keys, "gt_names"), b),
             fmt::format("expected a str, found {}", DescribePickleValue(item)));
      }
      name = item.text;
    } else {
      // The raw element (UCS-4 or bytes, NUL padded) is the cache key: one decode per class.
      const std::string_view raw(names.text.data() + b * names.dtype.itemsize, names.dtype.itemsize);
      auto& cache = names.dtype.kind == 'U' ? unicode_cache_ : bytes_cache_;
      const auto hit = cache.find(raw);
      if (hit != cache.end()) return hit->second;
      name = NumpyString(names, b);
      const uint32_t index = Intern(name, i, b, keys);
      cache.emplace(std::string(raw), index);
      return index;
    }
    return Intern(name, i, b, keys);
  }
  uint32_t Intern(const std::string& name, size_t i, uint64_t b, const BoxKeys& keys) {
    if (name.empty()) Fail(fmt::format("{}[{}]", Where(i, keys, "gt_names"), b), "an empty class name");
    const auto [it, inserted] = classes_.emplace(name, static_cast<uint32_t>(out_.class_names.size()));
    if (inserted) out_.class_names.push_back(name);
    return it->second;
  }

  struct StringHash {
    using is_transparent = void;
    size_t operator()(std::string_view text) const { return std::hash<std::string_view>{}(text); }
  };
  using Cache = std::unordered_map<std::string, uint32_t, StringHash, std::equal_to<>>;

  const std::string& file_;
  uint64_t file_bytes_;
  const Mmdet3dInfosOptions& options_;
  ImportedSubDataset& out_;
  std::unordered_map<std::string, uint32_t> classes_;
  bool av2_ = false;  // Far3D's Argoverse 2 infos (ReadAv2Info)
  uint64_t infos_without_lidar_pts_ = 0;
  size_t first_info_without_lidar_pts_ = 0;
  Cache unicode_cache_;
  Cache bytes_cache_;
  uint64_t records_ = 0;  // infos read by ReadRecord
  bool second_list_ = false;
  std::exception_ptr info_error_;
};

}  // namespace

ImportedSubDataset ParseMmdet3dInfos(std::string_view bytes, const std::string& display_name,
                                     const Mmdet3dInfosOptions& options) {
  ImportedSubDataset out;
  out.source = display_name;
  out.name = options.name.empty() ? TextOfBytes(StemOf(display_name)) : options.name;  // a path is bytes
  if (bytes.empty()) throw ScenarioError(display_name + ": empty file (not a pickle)");
  PickleOptions pickle;
  pickle.numpy = true;
  pickle.torch = true;  // Far3D's Argoverse 2 boxes are torch tensors
  pickle.opaque_globals = Av2OpaqueGlobals();
  pickle.salvage = false;  // a cut file is an error here, not a partial dataset
  pickle.record_lists = {"infos", "data_list"};
  pickle.record_top_list = true;  // the older format: a bare list of infos
  pickle.record_keys = KeptKeys();
  pickle.record_length_keys = {"sweeps"};
  // A list far longer than any real dataset's is refused before its frames are built: a pickle can
  // repeat one memoised info millions of times in a few bytes each.
  pickle.record_items_max = kInfosPerFileMax;
  pickle.record_items_why = fmt::format(
      " (infos), petrsim's limit for one info file (nuScenes trainval has 34,149, Waymo's train split 158,081): "
      "importing them would need more than {} of memory ({} frames x about {} B each); split the file or check "
      "how it was written",
      FormatBytes(kInfosPerFileMax * kImportBytesPerFrame), kInfosPerFileMax, kImportBytesPerFrame);
  pickle.progress = options.progress;
  pickle.release = options.release;
  pickle.release_range = options.release_range;
  bool av2 = false;
  {
    // Each info read as the pickle reader adds it to the list: its nodes are reused, never copied to a tree of the
    // whole file.
    auto reader = std::make_unique<InfoReader>(display_name, bytes.size(), options, out);
    pickle.on_record = [&reader](const PickleNode& info, uint64_t i) { reader->ReadRecord(info, i); };
    std::optional<PickleDocument> doc;
    try {
      doc.emplace(ParsePickle(bytes, display_name, pickle));
    } catch (const PickleError& error) {
      // A record changed after it was handed over (hand-made): the whole tree reads it as it ends up.
      if (std::string_view(error.what()).find(kRecordChangedAfterHandOver) == std::string_view::npos) throw;
    }
    if (doc && reader->ReadAsRecords(*doc->root)) {
      reader->ReadRoot(*doc->root, /*records_read=*/true);
    } else {
      ImportedSubDataset again;
      again.source = out.source;
      again.name = out.name;
      out = std::move(again);
      reader = std::make_unique<InfoReader>(display_name, bytes.size(), options, out);
      pickle.on_record = nullptr;
      const PickleDocument whole = ParsePickle(bytes, display_name, pickle);
      reader->ReadRoot(*whole.root);
    }
    av2 = reader->av2();
  }
  if (av2) {
    KeepOrderAndCutScenesBySceneId(out, options.interval_test);
  } else {
    OrderFramesAndCutScenes(out);
  }
  return out;
}

ImportedSubDataset ReadMmdet3dInfos(const std::string& path, const Mmdet3dInfosOptions& options) {
  // Mapped rather than read: the pages come straight from the page cache, without a copy.
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw ScenarioError(fmt::format("{}: cannot open info file: {}", path, std::strerror(errno)));
  struct stat info;
  if (::fstat(fd, &info) != 0 || !S_ISREG(info.st_mode)) {
    ::close(fd);
    throw ScenarioError(fmt::format("{}: not a regular file", path));
  }
  NoteInputFile(path, fd);
  const auto size = static_cast<size_t>(info.st_size);
  if (size == 0) {
    ::close(fd);
    return ParseMmdet3dInfos({}, path, options);
  }
  // Not populated: the pages behind the reader are dropped as it goes (Mmdet3dInfosOptions::
  // release), so memory holds what the import keeps and a window of the file, never all of it.
  void* data = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
  ::close(fd);
  if (data == MAP_FAILED)
    throw ScenarioError(fmt::format("{}: cannot map the info file: {}", path, std::strerror(errno)));
  struct Unmap {
    void* data;
    size_t size;
    ~Unmap() { ::munmap(data, size); }
  } unmap{data, size};
  ::madvise(data, size, MADV_SEQUENTIAL);
  Mmdet3dInfosOptions mapped = options;
  const uint64_t page = static_cast<uint64_t>(::sysconf(_SC_PAGESIZE));
  mapped.release = [data, size, page, released = uint64_t{0}](uint64_t done) mutable {
    const uint64_t behind = std::min<uint64_t>(done, size) / page * page;
    if (behind < released) released = 0;  // the reader started over (it read the file again)
    if (behind > released) {
      // Clean file pages: the page cache keeps them, and a str the reader makes again from its
      // bytes (PickleOptions::release), or a read again, maps them again.
      ::madvise(static_cast<char*>(data) + released, behind - released, MADV_DONTNEED);
      released = behind;
    }
  };
  mapped.release_range = [data, size, page](uint64_t from, uint64_t to) {
    const uint64_t first = (std::min<uint64_t>(from, size) + page - 1) / page * page;
    const uint64_t last = std::min<uint64_t>(to, size) / page * page;
    if (last > first) ::madvise(static_cast<char*>(data) + first, last - first, MADV_DONTNEED);
  };
  return ParseMmdet3dInfos(std::string_view(static_cast<const char*>(data), size), path, mapped);
}

}  // namespace petrsim
