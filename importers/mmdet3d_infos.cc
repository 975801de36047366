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
#include <unordered_map>

#include "formats/pickle/pickle.h"
#include "model/error.h"

namespace petrsim {
namespace {

using Type = PickleNode::Type;

// The info keys the importer reads; the reader drops every other value while it parses (the
// cameras, sweeps' details and 2D annotations are most of a real file).
const std::vector<std::string>& KeptKeys() {
  static const std::vector<std::string> keys = {"token",    "timestamp",     "scene_token",   "scene_name", "gt_boxes",
                                                "gt_names", "num_lidar_pts", "num_radar_pts", "valid_flag"};
  return keys;
}

std::string StemOf(const std::string& path) {
  std::string name = path.substr(path.find_last_of('/') + 1);
  if (name.size() > 4 && name.compare(name.size() - 4, 4, ".pkl") == 0) name.resize(name.size() - 4);
  return name;
}

class InfoReader {
 public:
  InfoReader(const std::string& file, uint64_t file_bytes, const Mmdet3dInfosOptions& options, ImportedSubDataset& out)
      : file_(file), file_bytes_(file_bytes), options_(options), out_(out) {}

  void ReadRoot(const PickleNode& root) {
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
    out_.frames.reserve(infos->items.size());
    for (size_t i = 0; i < infos->items.size(); ++i) ReadInfo(*infos->items[i], i);
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

  const PickleNode& Need(const PickleNode& info, size_t i, const char* key, const char* why = "") const {
    const PickleNode* value = info.Get(key);
    if (value == nullptr) {
      Fail(fmt::format("infos[{}]", i), fmt::format("missing key '{}'{}", key, why));
    }
    return *value;
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
    ReadBoxes(info, i, frame);
    out_.frames.push_back(std::move(frame));
  }

  void ReadBoxes(const PickleNode& info, size_t i, ImportedFrame& frame) {
    const char* no_gt = " (a test-split info file has no annotations; import the train and val infos)";
    const PickleNode& boxes = Need(info, i, "gt_boxes", no_gt);
    uint64_t n = 0;
    uint64_t columns = 0;
    if (IsArray(boxes) && boxes.dtype.kind == 'f' && boxes.shape.size() == 2 && boxes.shape[1] >= 7) {
      n = static_cast<uint64_t>(boxes.shape[0]);
      columns = static_cast<uint64_t>(boxes.shape[1]);
    } else if (!Empty1D(boxes)) {
      Fail(Where(i, "gt_boxes"), fmt::format("expected a float array of shape (N, 7) (x, y, z, dx, dy, "
                                             "dz, yaw), found {}",
                                             DescribePickleValue(boxes)));
    }
    const PickleNode& names = Need(info, i, "gt_names", no_gt);
    // What mmdet3d's NuScenesDataset.get_ann_info reads: valid_flag with use_valid_flag, else
    // num_lidar_pts (> 0); num_radar_pts never (the converter's valid_flag counts it). Each may
    // be absent when mmdet3d does not read it.
    const PickleNode* valid = info.Get("valid_flag");
    if (valid == nullptr && options_.use_valid_flag) {
      Fail(fmt::format("infos[{}]", i),
           "missing key 'valid_flag' (mmdet3d reads it with use_valid_flag; "
           "import with --no-valid-flag if your config sets use_valid_flag=False)");
    }
    const PickleNode* lidar = info.Get("num_lidar_pts");
    if (lidar == nullptr && !options_.use_valid_flag) {
      Fail(fmt::format("infos[{}]", i),
           "missing key 'num_lidar_pts' (mmdet3d reads it with use_valid_flag=False: a box is valid when "
           "num_lidar_pts > 0)");
    }
    if (lidar == nullptr && infos_without_lidar_pts_++ == 0) first_info_without_lidar_pts_ = i;
    const PickleNode* radar = info.Get("num_radar_pts");
    // An empty frame's arrays come out of np.array([]) as float64: any dtype is fine at length 0.
    auto check_1d = [&](const PickleNode& array, const char* key, const char* kinds, const char* expected) {
      if (n == 0 && Empty1D(array)) return;
      const bool kind_ok = IsArray(array) && std::strchr(kinds, array.dtype.kind) != nullptr && array.dtype.kind != 0;
      if (!kind_ok || array.shape.size() != 1 || static_cast<uint64_t>(array.shape[0]) != n) {
        Fail(Where(i, key), fmt::format("expected {} of shape ({},) (one per gt_boxes row), found {}", expected, n,
                                        DescribePickleValue(array)));
      }
    };
    if (IsArray(names) && names.dtype.kind == 'S' && !(n == 0 && Empty1D(names))) {
      // mmdet3d compares the names with its str class names: b'car' never matches 'car'.
      Fail(Where(i, "gt_names"), fmt::format("expected a str array ('<U..') or an object array of str, found a bytes "
                                             "dtype ({}): mmdet3d compares names as str, so bytes names match no class",
                                             DescribePickleValue(names)));
    }
    check_1d(names, "gt_names", "UO", "a str array");
    if (lidar != nullptr) check_1d(*lidar, "num_lidar_pts", "iu", "an int array");
    if (radar != nullptr) check_1d(*radar, "num_radar_pts", "iu", "an int array");
    if (valid != nullptr) check_1d(*valid, "valid_flag", "b", "a bool array");

    // An array shared between infos (one memo entry fetched again) costs the file a few bytes
    // but the dataset its rows once per info: a real box costs the file at least its 7 float32
    // of gt_boxes (28 bytes), so more boxes than one per kFileBytesPerBox bytes are refused.
    if (n > 0 && out_.boxes.size() + n > MaxBoxes()) {
      Fail(Where(i, "gt_boxes"), fmt::format("the infos so far hold {} boxes, more than a {}-byte file can hold (at "
                                             "most {}, one per {} bytes; a real box costs at least 28 bytes of "
                                             "gt_boxes): are arrays shared between infos?",
                                             out_.boxes.size() + n, file_bytes_, MaxBoxes(), kFileBytesPerBox));
    }
    frame.box_begin = static_cast<uint32_t>(out_.boxes.size());
    for (uint64_t b = 0; b < n; ++b) {
      ImportedBox box;
      box.class_index = ClassIndex(names, b, i);
      const double x = NumpyFloat(boxes, b * columns);
      const double y = NumpyFloat(boxes, b * columns + 1);
      box.x = static_cast<float>(x);
      box.y = static_cast<float>(y);
      if (!std::isfinite(box.x) || !std::isfinite(box.y)) {
        Fail(fmt::format("infos[{}].gt_boxes[{}]", i, b),
             fmt::format("expected a finite BEV centre, found ({}, {})", x, y));
      }
      if (lidar != nullptr) {
        box.num_lidar_pts = Count(*lidar, b, i, "num_lidar_pts");
      } else {
        box.num_lidar_pts = NumpyInt(*valid, b) != 0 ? 1 : 0;  // only the stored flag is known
      }
      box.num_radar_pts = radar != nullptr ? Count(*radar, b, i, "num_radar_pts") : 0;
      if (valid != nullptr) {
        const bool flag = NumpyInt(*valid, b) != 0;
        const bool counted = uint64_t{box.num_lidar_pts} + box.num_radar_pts > 0;
        if (flag != counted) box.valid_flag = flag ? 1 : 0;
      }
      out_.boxes.push_back(box);
    }
    if (out_.boxes.size() > UINT32_MAX) Fail("infos", "more than 2^32 boxes");
    frame.box_end = static_cast<uint32_t>(out_.boxes.size());
  }

  static constexpr uint64_t kFileBytesPerBox = 16;
  uint64_t MaxBoxes() const { return file_bytes_ / kFileBytesPerBox; }

  uint32_t Count(const PickleNode& array, uint64_t b, size_t i, const char* key) const {
    if (!NumpyIntFits(array, b)) {
      Fail(fmt::format("infos[{}].{}[{}]", i, key, b),
           fmt::format("expected a count in [0, 2^32), found {}", NumpyUint64(array, b)));
    }
    const int64_t value = NumpyInt(array, b);
    if (value < 0 || value > int64_t{UINT32_MAX}) {
      Fail(fmt::format("infos[{}].{}[{}]", i, key, b), fmt::format("expected a count in [0, 2^32), found {}", value));
    }
    return static_cast<uint32_t>(value);
  }

  uint32_t ClassIndex(const PickleNode& names, uint64_t b, size_t i) {
    std::string name;
    if (names.dtype.kind == 'O') {
      const PickleNode& item = *names.items[b];
      if (item.type != Type::kString) {
        Fail(fmt::format("infos[{}].gt_names[{}]", i, b),
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
      const uint32_t index = Intern(name, i, b);
      cache.emplace(std::string(raw), index);
      return index;
    }
    return Intern(name, i, b);
  }
  uint32_t Intern(const std::string& name, size_t i, uint64_t b) {
    if (name.empty()) Fail(fmt::format("infos[{}].gt_names[{}]", i, b), "an empty class name");
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
  uint64_t infos_without_lidar_pts_ = 0;
  size_t first_info_without_lidar_pts_ = 0;
  Cache unicode_cache_;
  Cache bytes_cache_;
};

}  // namespace

ImportedSubDataset ParseMmdet3dInfos(std::string_view bytes, const std::string& display_name,
                                     const Mmdet3dInfosOptions& options) {
  ImportedSubDataset out;
  out.source = display_name;
  out.name = options.name.empty() ? StemOf(display_name) : options.name;
  if (bytes.empty()) throw ScenarioError(display_name + ": empty file (not a pickle)");
  PickleOptions pickle;
  pickle.numpy = true;
  pickle.salvage = false;  // a cut file is an error here, not a partial dataset
  pickle.record_lists = {"infos", "data_list"};
  pickle.record_top_list = true;  // the older format: a bare list of infos
  pickle.record_keys = KeptKeys();
  pickle.record_length_keys = {"sweeps"};
  pickle.progress = options.progress;
  {
    const PickleDocument doc = ParsePickle(bytes, display_name, pickle);
    InfoReader(display_name, bytes.size(), options, out).ReadRoot(*doc.root);
  }
  OrderFramesAndCutScenes(out);
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
  const auto size = static_cast<size_t>(info.st_size);
  if (size == 0) {
    ::close(fd);
    return ParseMmdet3dInfos({}, path, options);
  }
  void* data = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE | MAP_POPULATE, fd, 0);
  ::close(fd);
  if (data == MAP_FAILED)
    throw ScenarioError(fmt::format("{}: cannot map the info file: {}", path, std::strerror(errno)));
  struct Unmap {
    void* data;
    size_t size;
    ~Unmap() { ::munmap(data, size); }
  } unmap{data, size};
  ::madvise(data, size, MADV_SEQUENTIAL);
  return ParseMmdet3dInfos(std::string_view(static_cast<const char*>(data), size), path, options);
}

}  // namespace petrsim
