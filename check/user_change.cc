// Fixes as the user's change; see user_change.h.
#include "check/user_change.h"

#include <map>

#include <fmt/format.h>

namespace petrsim {
namespace {

const char* kWholeSubDataset = "`return np.random.randint(0, len(self))`";

// "CustomNuScenesDataset._rand_another (FILE:LINE)" or the general name.
std::string RandAnother(const Scenario& scenario) {
  if (!scenario.has_user_source()) return "your dataset class's `_rand_another` (mmdet3d's Custom3DDataset's)";
  const UserSource& user = scenario.user_source();
  std::string text = fmt::format("{}._rand_another", user.dataset_type());
  if (!user.rand_another_where().empty()) text += fmt::format(" ({})", user.rand_another_where());
  return text;
}

std::string DictName(const Scenario& scenario) {
  if (!scenario.has_user_source()) return "the train dataset's dict (data.train)";
  const UserSource& user = scenario.user_source();
  std::string text = fmt::format("{} (type='{}'", user.dataset_dict(), user.dataset_type());
  if (!user.dataset_dict_where().empty()) text += ", " + user.dataset_dict_where();
  return text + ")";
}

std::vector<std::string> PolicyChange(const Scenario& scenario, const Fix& fix) {
  const std::string policy = fix.set.substr(fix.set.find('=') + 1);
  const int subdatasets = scenario.dataset().subdatasets_size();
  if (policy == "in_subdataset" || (policy == "global" && subdatasets <= 1)) {
    return {
        fmt::format("code: in {}, draw from the whole dataset instead of the frame's sequence group: {} (under "
                    "ConcatDataset, ann_file=[...], each info file's dataset draws within itself)",
                    RandAnother(scenario), kWholeSubDataset)};
  }
  if (policy == "global") {
    return {
        fmt::format("code: the draw must reach every info file's frames, which a dataset's own _rand_another "
                    "cannot under ConcatDataset: merge the {} info files into one ann_file, then in {} {}",
                    subdatasets, RandAnother(scenario), kWholeSubDataset)};
  }
  if (policy == "next_valid_in_group") {
    return {fmt::format(
        "code: in {}, return the next frame after idx in the same group (self.flag) whose info has GT after the "
        "filters, wrapping around, else the next such frame of the dataset: compute which frames have GT once in "
        "__init__ (from the infos' gt_names, valid_flag and the range and class filters)",
        RandAnother(scenario))};
  }
  if (policy == "drop_empty_groups") {
    return {fmt::format(
        "code: in {}'s __init__, after the group flags are set (_set_sequence_group_flag), remove the frames of every "
        "group none of whose frames has GT after the filters from data_infos and self.flag (or the data change "
        "below, which drops them from the info files)",
        scenario.has_user_source() ? scenario.user_source().dataset_type() : std::string("your dataset class"))};
  }
  if (policy == "bounded") {
    return {
        fmt::format("code: cap the retry loop of __getitem__ at {} loads, then raise an error that names idx and "
                    "its group",
                    scenario.resample().attempts_max())};
  }
  return {};
}

}  // namespace

std::vector<std::string> UserChange(const Scenario& scenario, const Fix& fix) {
  if (!fix.proven) return {};
  if (fix.kind == "resample_policy") return PolicyChange(scenario, fix);
  if (fix.kind == "filter_empty_gt") {
    if (scenario.has_user_source() && !scenario.user_source().filter_empty_gt_where().empty()) {
      return {fmt::format("config: {}: filter_empty_gt=True -> filter_empty_gt=False, in {}",
                          scenario.user_source().filter_empty_gt_where(), DictName(scenario))};
    }
    return {fmt::format("config: add filter_empty_gt=False to {} (the dataset class's default is True)",
                        DictName(scenario))};
  }
  if (fix.kind == "drop_frames") {
    std::string files;
    if (scenario.has_user_source()) {
      for (const std::string& file : scenario.user_source().info_files()) files += (files.empty() ? "" : ", ") + file;
    }
    return {
        fmt::format("data: drop the frames above from the info files{}; `petrsim check --write-drops FILE.py` "
                    "writes a script that does it (by sample token), then import and check the fixed files",
                    files.empty() ? "" : " (" + files + ")")};
  }
  return {};
}

std::string DropScript(const Scenario& scenario, const std::vector<Fix>& drops, const std::string& scenario_path) {
  std::map<std::string, std::vector<const Fix*>> by_subdataset;
  bool tokens = true;
  for (const Fix& fix : drops) {
    by_subdataset[fix.subdataset_name].push_back(&fix);
    for (const auto& [sub, token] : fix.sample_tokens) {
      if (sub != fix.subdataset_name) by_subdataset[sub];  // a pool that spans sub-datasets
    }
    tokens = tokens && !fix.sample_tokens.empty();
  }
  std::map<std::string, std::string> info_file;  // sub-dataset name -> its info file
  if (scenario.has_user_source()) {
    for (int i = 0; i < scenario.dataset().subdatasets_size() && i < scenario.user_source().info_files_size(); ++i) {
      info_file[scenario.dataset().subdatasets(i).name()] = scenario.user_source().info_files(i);
    }
  }
  std::string out = fmt::format(
      "#!/usr/bin/env python3\n"
      "# Written by `petrsim check --write-drops` for {}: the frames to drop from the info files so that no\n"
      "# sequence group the resample loop draws from is without GT. petrsim proved the fix by rebuilding the\n"
      "# dataset without them and re-running its check; after running this, import the fixed files and check\n"
      "# again. Reads and writes pickles (stdlib pickle; the infos hold numpy arrays: numpy must be importable).\n"
      "import pickle\nimport sys\n\n",
      scenario_path);
  out += "DROPS = {\n";
  for (const auto& [name, fixes] : by_subdataset) {
    const auto it = info_file.find(name);
    out += fmt::format("    '{}': {{\n        'info_file': {},\n        'frames': [\n", name,
                       it == info_file.end() ? std::string("None") : fmt::format("'{}'", it->second));
    for (const Fix* fix : fixes) {
      out += fmt::format("            # scene '{}' frames {}..{} of the scene{}\n", fix->scene_name,
                         fix->first_frame_in_scene, fix->last_frame_in_scene, fix->recut ? " (re-cut)" : "");
    }
    out += "        ],\n        'sample_tokens': [\n";
    for (const Fix* fix : fixes) {
      for (const auto& [sub, token] : fix->sample_tokens) {
        if (sub == name) out += fmt::format("            '{}',\n", token);
      }
    }
    out += "        ],\n    },\n";
  }
  out += "}\n\n";
  out += fmt::format(
      "def main():\n"
      "    for name, drop in DROPS.items():\n"
      "        if drop['info_file'] is None or not drop['sample_tokens']:\n"
      "            sys.exit('petrsim: sub-dataset %r: {}' % name)\n"
      "        with open(drop['info_file'], 'rb') as f:\n"
      "            data = pickle.load(f)\n"
      "        infos = data['infos'] if isinstance(data, dict) else data\n"
      "        tokens = set(drop['sample_tokens'])\n"
      "        kept = [info for info in infos if info.get('token') not in tokens]\n"
      "        if len(infos) - len(kept) != len(tokens):\n"
      "            sys.exit('petrsim: %s: %d of the %d sample tokens found; not written'\n"
      "                     % (drop['info_file'], len(infos) - len(kept), len(tokens)))\n"
      "        if isinstance(data, dict):\n"
      "            data['infos'] = kept\n"
      "        else:\n"
      "            data = kept\n"
      "        out = drop['info_file'][:-4] + '.petrsim_fixed.pkl'\n"
      "        with open(out, 'wb') as f:\n"
      "            pickle.dump(data, f)\n"
      "        print('%s: %d infos dropped, %d kept -> %s' % (drop['info_file'], len(tokens), len(kept), out))\n\n\n"
      "if __name__ == '__main__':\n"
      "    main()\n",
      tokens ? "its info file is not known (import the scenario with petrsim import mmdet3d-config)"
             : "the scenario gives no sample tokens (a synthetic dataset): drop the frames in the comments by hand");
  return out;
}

}  // namespace petrsim
