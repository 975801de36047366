// A user's own dataset class, read from its Python source without importing it (issue 27, point 5):
// when the config names a plugin (plugin=True, plugin_dir='projects/mmdet3d_plugin/') and the checkout
// holding the config holds that directory, the class the config's `type` names is found there, parsed
// (formats/pyconfig, never run) and its semantics are taken from its own code where petrsim recognises
// the pattern, and from the class it derives from elsewhere:
// - __getitem__: mmdet3d's unbounded retry loop (`while True:` ... `data = self.prepare_train_data(idx)`
//   ... `if data is None: idx = self._rand_another(idx)`), mmengine's bounded one (`for _ in
//   range(self.max_refetch + 1)`: at most that many loads, then an error), or none (prepare_train_data's
//   result returned as it is);
// - _rand_another: `np.random.choice(np.where(self.flag == self.flag[idx])[0])` (the frame's group),
//   `np.where(self.flag != -1)[0]`, `np.arange(len(self))`, `len(self)`, `np.random.randint(0, len(self))`
//   (the whole dataset);
// - __init__'s defaults of filter_empty_gt, use_valid_flag, test_mode; seq_mode / with_seq_flag in its
//   signature with a sequence-flag method (the chunked groups of StreamPETR / Sparse4D);
// - CLASSES as a tuple or list of strings.
// Each finding names the file:line it rests on; code it does not recognise is said plainly with what
// was assumed instead (the base class's semantics).
#pragma once

#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "importers/dataset_semantics.h"

namespace petrsim {

struct DatasetSourceReading {
  DatasetSemantics semantics;         // the base's entry, overridden by what the class's code says
  std::string class_where;            // "FILE:LINE" of `class TYPE(...)`
  std::string base_entry;             // the registry entry it builds on ("NuScenesDataset of mmdet3d ...")
  std::vector<std::string> findings;  // what was read where, and what was not recognised
};

// Limits: 4,000 .py files under the plugin directory, 4 MiB per file, 8 levels of base classes in the
// plugin, 8 directories up from the config to the checkout's root.
struct DatasetSourceQuery {
  std::string config_path;        // the config given (its directory anchors the search)
  std::string plugin_dir;         // the config's plugin_dir, relative to the checkout's root
  std::string type;               // data.train's type
  std::vector<std::string> keys;  // the dataset dict's keys (to pick among registry entries of a base)
};

// nullopt when the plugin directory or the class is not found (the registry then decides); throws
// ScenarioError for a source file petrsim cannot parse (file:line:col).
std::optional<DatasetSourceReading> ReadDatasetSource(const DatasetSourceQuery& query);
// Whether the plugin directory itself is found from the config's folder upwards (within its checkout).
bool PluginDirectoryFound(const DatasetSourceQuery& query);

}  // namespace petrsim
