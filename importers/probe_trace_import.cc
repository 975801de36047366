// `petrsim import probe-trace`; see probe_trace_import.h.
#include "importers/probe_trace_import.h"
#include "importers/import_output.h"

#include <fmt/format.h>
#include <google/protobuf/text_format.h>
#include <google/protobuf/util/json_util.h>
#include <sys/stat.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <map>
#include <optional>
#include <regex>

#include "base/assert.h"
#include "base/error.h"
#include "base/file_io.h"
#include "base/temp_files.h"
#include "data/dataset.h"
#include "data/sampler.h"
#include "plan/ddp_plan.h"
#include "scenario/scenario_loader.h"
#include "scenario/scenario_validation.h"
#include "scenario/torch_version.h"
#include "trace/reader.h"
#include "trace/trace_event.h"

namespace petrsim {
namespace {

constexpr double kMiB = 1024.0 * 1024.0;
constexpr char kBucketText[] = "DDP allreduce (gradient bucket)";

// One recorded collective of rank 0.
struct Call {
  std::string group;
  uint64_t seq = 0;
  Collective::Op op = Collective::allreduce;
  uint64_t numel = 0;
  Collective::Dtype dtype = Collective::float32;
  std::string text;
  bool ddp = false;     // issued by DDP (the probe's text says "DDP ...")
  bool bucket = false;  // a gradient bucket (or the used-parameter map after them)
};

struct RankFile {
  std::string path;
  TraceHeader header;
  std::map<uint32_t, DdpLayout> construction;  // per DDP: the construction event
  std::map<uint32_t, DdpLayout> ready;         // per DDP: the event with the ready order
  std::map<uint32_t, DdpLayout> rebuilt;       // per DDP: the rebuilt layout
  std::map<uint32_t, std::string> comm_hook;   // per DDP: the job's own communication hook
  std::vector<Call> calls;
  uint64_t events = 0;  // events read (all kinds)
  std::string partial;  // the reading error of a file cut short, or ""
};

RankFile ReadRank(const std::string& path) {
  RankFile rank;
  rank.path = path;
  rank.header = ScanTraceEvents(
      path,
      [&](const TraceEventView& event) {
        ++rank.events;
        if (event.kind == TraceEventKind::ddp_layout) {
          DdpLayout layout;
          if (!layout.ParseFromArray(event.ddp_layout.data(), static_cast<int>(event.ddp_layout.size()))) {
            throw ScenarioError(
                fmt::format("{}: event {} (ddp_layout): its DdpLayout does not parse (a probe from another "
                            "petrsim? expected proto/trace.proto's DdpLayout)",
                            path, rank.events));
          }
          if (layout.tensors_size() > 0) rank.construction.emplace(layout.ddp(), layout);
          if (layout.ready_order_recorded()) rank.ready.emplace(layout.ddp(), layout);
          if (layout.rebuilt()) rank.rebuilt.emplace(layout.ddp(), layout);
          if (!layout.comm_hook().empty()) rank.comm_hook[layout.ddp()] = layout.comm_hook();
        } else if (event.kind == TraceEventKind::collective) {
          Call call;
          call.group = event.process_group.empty() ? "default_pg" : std::string(event.process_group);
          call.seq = event.seq;
          call.op = event.op;
          call.numel = event.numel;
          call.dtype = event.dtype;
          call.text = std::string(event.text);
          call.ddp = call.text.rfind("DDP ", 0) == 0;
          call.bucket = call.text == kBucketText || call.text.rfind("DDP used-parameter map", 0) == 0;
          rank.calls.push_back(std::move(call));
        }
      },
      &rank.partial);
  return rank;
}

// "; the file is cut short (...)" where it is, for messages about what a file lacks.
std::string CutShort(const RankFile& rank) {
  return rank.partial.empty() ? std::string() : fmt::format("; the file is cut short: {}", rank.partial);
}

// The rank files of `trace_dir`, by rank; rank 0 first (the plan is taken from it).
std::vector<RankFile> ReadRanks(const std::string& trace_dir) {
  struct stat info {};
  if (::stat(trace_dir.c_str(), &info) != 0) {
    throw ScenarioError(fmt::format("{}: expected a probe trace directory (rank_<r>.pbtrace files), found nothing: {}",
                                    trace_dir, std::strerror(errno)));
  }
  if (!S_ISDIR(info.st_mode)) {
    throw ScenarioError(fmt::format("{}: expected a probe trace directory (rank_<r>.pbtrace files), found {}",
                                    trace_dir, FileKindName(info.st_mode)));
  }
  std::map<uint32_t, std::string> paths;
  static const std::regex name(R"(rank_(\d{1,6})\.pbtrace)");
  std::error_code error;
  for (const auto& entry : std::filesystem::directory_iterator(trace_dir, error)) {
    std::smatch match;
    const std::string file = entry.path().filename().string();
    if (std::regex_match(file, match, name)) paths[static_cast<uint32_t>(std::stoul(match[1].str()))] = entry.path();
  }
  if (error) throw ScenarioError(fmt::format("{}: cannot list: {}", trace_dir, error.message()));
  if (paths.empty()) {
    throw ScenarioError(
        fmt::format("{}: expected rank_<r>.pbtrace files (what petrsim_probe writes), found none", trace_dir));
  }
  if (!paths.contains(0)) {
    std::string found;
    for (const auto& [r, path] : paths) found += (found.empty() ? "" : ", ") + std::to_string(r);
    throw ScenarioError(
        fmt::format("{}: expected rank 0's trace (plan.ddp and the plan are taken from rank 0), found "
                    "none; the directory holds rank(s) {}",
                    RankTracePath(trace_dir, 0), found));
  }
  std::vector<RankFile> ranks;
  for (const auto& [r, path] : paths) {
    ranks.push_back(ReadRank(path));
    if (ranks.back().header.rank() != r) {
      throw ScenarioError(
          fmt::format("{}: its header says rank {}, the file name rank {}", path, ranks.back().header.rank(), r));
    }
  }
  return ranks;
}

std::string ShapeText(const DdpTensor& t) {
  std::string out = "[";
  for (int d = 0; d < t.shape_size(); ++d) out += (d ? ", " : "") + std::to_string(t.shape(d));
  return out + "]";
}

std::string TensorText(const DdpTensor& t) {
  return fmt::format("{} {} {} {}", t.kind() == DdpTensor::buffer ? "buffer" : "parameter", t.name(), ShapeText(t),
                     Collective::Dtype_Name(t.dtype()));
}

// The first difference between two ranks' construction layouts, or "".
std::string LayoutDifference(const DdpLayout& a, const DdpLayout& b) {
  if (a.tensors_size() != b.tensors_size()) {
    return fmt::format("{} tensors, against {}", b.tensors_size(), a.tensors_size());
  }
  for (int i = 0; i < a.tensors_size(); ++i) {
    const DdpTensor& x = a.tensors(i);
    const DdpTensor& y = b.tensors(i);
    if (x.SerializeAsString() != y.SerializeAsString()) {
      return fmt::format("tensors[{}] is {}, against {}", i, TensorText(y), TensorText(x));
    }
  }
  if (a.bucket_cap_bytes() != b.bucket_cap_bytes()) {
    return fmt::format("bucket_cap_bytes {}, against {}", b.bucket_cap_bytes(), a.bucket_cap_bytes());
  }
  if (a.find_unused_parameters() != b.find_unused_parameters()) {
    return fmt::format("find_unused_parameters {}, against {}", b.find_unused_parameters(), a.find_unused_parameters());
  }
  if (a.broadcast_buffers() != b.broadcast_buffers()) {
    return fmt::format("broadcast_buffers {}, against {}", b.broadcast_buffers(), a.broadcast_buffers());
  }
  if (a.process_group() != b.process_group()) {
    return fmt::format("process_group '{}', against '{}'", b.process_group(), a.process_group());
  }
  return "";
}

Collective ToCollective(const Call& call, const std::string& name) {
  Collective c;
  c.set_name(name);
  c.set_op(call.op);
  c.set_numel(call.numel);
  c.set_dtype(call.dtype);
  if (call.group != "default_pg") c.set_process_group(call.group);
  return c;
}

std::string Signature(const std::vector<const Call*>& calls) {
  std::string out;
  for (const Call* c : calls) {
    out += fmt::format("{} {} {};", Collective::Op_Name(c->op), c->numel, Collective::Dtype_Name(c->dtype));
  }
  return out;
}

// The index of the first DDP collective in calls, or calls.size() when DDP issued none.
size_t FirstDdpCall(const std::vector<const Call*>& calls) {
  for (size_t i = 0; i < calls.size(); ++i) {
    if (calls[i]->ddp) return i;
  }
  return calls.size();
}

// The backward passes from first_ddp on, as [begin, end) runs of gradient buckets in calls. A
// pass is a maximal run, so the calls between two passes are one iteration's forward and step.
std::vector<std::pair<size_t, size_t>> BackwardPasses(const std::vector<const Call*>& calls, size_t first_ddp) {
  std::vector<std::pair<size_t, size_t>> passes;
  for (size_t i = first_ddp; i < calls.size(); ++i) {
    if (!calls[i]->bucket) continue;
    size_t end = i;
    while (end < calls.size() && calls[end]->bucket) ++end;
    passes.emplace_back(i, end);
    i = end - 1;
  }
  return passes;
}

// Window k holds the calls that are not DDP's between pass k-1 and pass k: those are the job's own
// collectives of one iteration, which the plan replays.
std::vector<std::vector<const Call*>> IterationWindows(const std::vector<const Call*>& calls,
                                                       const std::vector<std::pair<size_t, size_t>>& passes) {
  std::vector<std::vector<const Call*>> windows;
  for (size_t k = 1; k < passes.size(); ++k) {
    std::vector<const Call*> window;
    for (size_t i = passes[k - 1].second; i < passes[k].first; ++i) {
      if (!calls[i]->ddp) window.push_back(calls[i]);
    }
    windows.push_back(std::move(window));
  }
  return windows;
}

// Rank 0's collectives on DDP's group that are not DDP's: before DDP's construction (startup), and
// of one steady iteration (the window between two backward passes' gradient buckets).
void AddOtherCollectives(const RankFile& rank0, const std::string& group, CustomPlan* plan,
                         std::vector<std::string>* summary) {
  std::vector<const Call*> calls;
  size_t other_groups = 0;
  for (const Call& c : rank0.calls) {
    if (c.group == group) {
      calls.push_back(&c);
    } else {
      ++other_groups;
    }
  }
  std::sort(calls.begin(), calls.end(), [](const Call* a, const Call* b) { return a->seq < b->seq; });
  const size_t first_ddp = FirstDdpCall(calls);
  if (first_ddp == calls.size()) {
    summary->push_back(fmt::format(
        "note: {} recorded no DDP collective on '{}' ({} collective(s) of its own there): the job's collectives "
        "cannot be placed before DDP's construction or in an iteration, so plan.custom holds none of them (was "
        "DDP built under the probe, on that group?)",
        rank0.path, group, calls.size()));
    if (other_groups > 0) {
      summary->push_back(fmt::format("note: {} collective(s) on groups other than DDP's '{}' are not in the plan",
                                     other_groups, group));
    }
    return;
  }
  for (size_t i = 0; i < first_ddp; ++i) {
    *plan->add_startup() = ToCollective(*calls[i], fmt::format("recorded before DDP: {}", calls[i]->text));
  }
  const std::vector<std::pair<size_t, size_t>> passes = BackwardPasses(calls, first_ddp);
  const std::vector<std::vector<const Call*>> windows = IterationWindows(calls, passes);
  if (windows.empty()) {
    summary->push_back(fmt::format(
        "plan.custom.per_iteration: empty ({} backward pass(es) with DDP gradient buckets recorded, fewer than 2: no "
        "steady iteration to take the job's own collectives from)",
        passes.size()));
    return;
  }
  // Iteration 2's window (the first after the rebuild), else the last one recorded.
  const size_t steady = std::min<size_t>(1, windows.size() - 1);
  for (const Call* c : windows[steady]) {
    *plan->add_per_iteration() = ToCollective(*c, fmt::format("recorded: {}", c->text));
  }
  size_t differing = 0;
  for (const auto& window : windows) differing += Signature(window) != Signature(windows[steady]);
  summary->push_back(fmt::format(
      "plan.custom.per_iteration: {} collective(s) of rank 0 that are not DDP's, from iteration {} (between two "
      "backward passes){}",
      windows[steady].size(), steady + 1,
      differing ? fmt::format("; note: {} of the {} iterations recorded issued others", differing, windows.size())
                : ""));
  if (other_groups > 0) {
    summary->push_back(
        fmt::format("note: {} collective(s) on groups other than DDP's '{}' are not in the plan", other_groups, group));
  }
}

std::string Serialize(const Scenario& scenario, const std::string& path, const std::vector<std::string>& summary) {
  std::string bytes;
  if (path.ends_with(".pb")) {
    PETRSIM_ASSERT(scenario.SerializeToString(&bytes));
    return bytes;
  }
  if (path.ends_with(".json")) {
    google::protobuf::util::JsonPrintOptions options;
    options.add_whitespace = true;
    const auto status = google::protobuf::util::MessageToJsonString(scenario, &bytes, options);
    if (!status.ok())
      throw ScenarioError(fmt::format("{}: cannot write JSON: {}", path, std::string(status.message())));
    return bytes;
  }
  // The opening IsImportOutput knows an import's scenario by (import_output.h).
  std::string text =
      "# A petrsim scenario written by `petrsim import probe-trace` (proto/scenario.proto documents every "
      "field).\n";
  for (const std::string& line : summary) text += "# " + line + "\n";
  google::protobuf::TextFormat::PrintToString(scenario, &bytes);
  return text + bytes;
}

// The DDP plan.ddp describes (the first rank 0 built), after checking every rank built it with
// the same model and arguments.
uint32_t CheckRanksAgree(const std::vector<RankFile>& ranks, std::vector<std::string>* summary) {
  const RankFile& first = ranks.front();
  if (first.construction.empty()) {
    throw ScenarioError(fmt::format(
        "{}: expected a ddp_layout event (the DistributedDataParallel layout petrsim_probe records when DDP is "
        "built), found none in {} event(s){}: was the job's DDP built under the probe (install() before "
        "DistributedDataParallel(...)), by a petrsim_probe that records layouts?",
        first.path, first.events, CutShort(first)));
  }
  const uint32_t which = first.construction.begin()->first;
  const DdpLayout& layout = first.construction.begin()->second;
  if (first.construction.size() > 1) {
    summary->push_back(fmt::format("note: rank {} built {} DistributedDataParallel; plan.ddp is DDP {} (the first)",
                                   first.header.rank(), first.construction.size(), which));
  }
  for (const RankFile& rank : ranks) {
    const auto it = rank.construction.find(which);
    if (it == rank.construction.end()) {
      throw ScenarioError(fmt::format("{}: expected the ddp_layout of DDP {} (as in {}), found none in {} event(s){}",
                                      rank.path, which, first.path, rank.events, CutShort(rank)));
    }
    const std::string difference = LayoutDifference(layout, it->second);
    if (!difference.empty()) {
      throw ScenarioError(fmt::format("{}: DDP {} wraps another model than in {}: {} (traces of different jobs?)",
                                      rank.path, which, first.path, difference));
    }
  }
  const uint32_t world = first.header.world_size();
  if (ranks.size() != world) {
    summary->push_back(fmt::format("note: {} rank file(s) for world_size {}", ranks.size(), world));
  }
  return which;
}

uint64_t Trainable(const DdpLayout& layout) {
  return static_cast<uint64_t>(std::count_if(layout.tensors().begin(), layout.tensors().end(), [](const DdpTensor& t) {
    return t.kind() == DdpTensor::parameter && t.requires_grad();
  }));
}

// plan.ddp from rank 0's layout of DDP `which`; what the layout holds that petrsim cannot plan is
// an error naming the rank file and the DdpLayout field.
DdpModel BuildDdpModel(const RankFile& rank0, uint32_t which, std::vector<std::string>* summary) {
  const DdpLayout& layout = rank0.construction.at(which);
  for (int i = 0; i < layout.tensors_size(); ++i) {
    const DdpTensor& t = layout.tensors(i);
    for (int d = 0; d < t.shape_size(); ++d) {
      if (t.shape(d) == 0) {
        throw ScenarioError(fmt::format(
            "{}: ddp_layout.tensors[{}]: {} has no elements (size 0 in dimension {}): tensors with no elements are "
            "unsupported (plan.ddp's DdpTensor.shape sizes are >= 1)",
            rank0.path, i, TensorText(t), d));
      }
    }
  }
  DdpModel ddp;
  for (const DdpTensor& t : layout.tensors()) *ddp.add_tensors() = t;
  const uint64_t trainable = Trainable(layout);
  if (layout.bucket_cap_bytes() > 0) ddp.set_bucket_cap_mb(static_cast<double>(layout.bucket_cap_bytes()) / kMiB);
  if (layout.first_bucket_bytes() > 0 && layout.first_bucket_bytes() != 1024 * 1024) {
    ddp.set_first_bucket_mb(static_cast<double>(layout.first_bucket_bytes()) / kMiB);
  }
  ddp.set_find_unused_parameters(layout.find_unused_parameters());
  ddp.set_broadcast_buffers(layout.broadcast_buffers());
  ddp.set_process_group(layout.process_group().empty() ? "default_pg" : layout.process_group());
  const auto ready = rank0.ready.find(which);
  if (ready != rank0.ready.end()) {
    if (static_cast<uint64_t>(ready->second.grad_ready_order_size()) != trainable) {
      summary->push_back(fmt::format(
          "note: the recorded gradient-ready order lists {} of the {} parameters that require grad (some had no "
          "gradient in the first backward); plan.ddp.grad_ready_order left out (the reverse of registration)",
          ready->second.grad_ready_order_size(), trainable));
    } else {
      for (const uint32_t k : ready->second.grad_ready_order()) ddp.add_grad_ready_order(k);
    }
  } else {
    summary->push_back(
        "note: no gradient-ready order recorded (the job ended before its first backward returned); "
        "plan.ddp.grad_ready_order left out (the reverse of registration)");
  }
  // The fields DdpModel and DdpLayout share (tensors, grad_ready_order) have the same indices;
  // bucket_cap_mb and first_bucket_mb are bucket_cap_bytes and first_bucket_bytes / 2^20.
  const std::vector<std::string> problems = ValidateDdpModel(ddp, "ddp_layout");
  if (!problems.empty()) {
    std::string text;
    for (const std::string& problem : problems) text += (text.empty() ? "" : "; ") + problem;
    throw ScenarioError(
        fmt::format("{}: the layout of DDP {} is not one petrsim can plan: {}", rank0.path, which, text));
  }
  if (layout.static_graph()) {
    summary->push_back("note: DDP ran with static_graph=True, which petrsim's plan does not model");
  }
  const auto hook = rank0.comm_hook.find(which);
  if (hook != rank0.comm_hook.end()) {
    summary->push_back(fmt::format(
        "note: the job registered a communication hook on DDP {} ({}): the plan's gradient buckets assume DDP's "
        "default allreduce (one allreduce per bucket, in the gradients' dtype), not what the hook issues",
        which, hook->second));
  }
  return ddp;
}

// A placeholder dataset of `groups` sequence groups or more (the trace holds no dataset; every
// scenario needs one and the sampler must give every rank a group for each of its samples).
void AddPlaceholderDataset(uint64_t groups, Scenario* scenario) {
  // One scene of 4 frames is 2 groups (seq_split_num 2).
  const uint64_t scenes = std::max<uint64_t>(1, (groups + 1) / 2);
  std::string text = R"(subdatasets { name: "placeholder" explicit { )";
  for (uint64_t k = 0; k < scenes; ++k) text += "scenes { gt_counts: [1, 1, 1, 1] } ";
  text += "} }";
  PETRSIM_ASSERT(google::protobuf::TextFormat::ParseFromString(text, scenario->mutable_dataset()));
}

// The scenario: `into_path`'s with plan.ddp set, or one of its own (a placeholder dataset, the
// job's other collectives as a custom plan); the job's torch release and world size. Validated,
// and its sampler checked as `petrsim check` checks it.
Scenario BuildScenario(const std::string& trace_dir, const std::string& into_path, const RankFile& rank0,
                       const DdpModel& ddp, std::vector<std::string>* summary) {
  const uint32_t world = rank0.header.world_size();
  Scenario scenario;
  if (!into_path.empty()) {
    scenario = LoadScenarioFile(into_path);
    *scenario.mutable_plan()->mutable_ddp() = ddp;
  } else {
    scenario.set_name("probe_trace");
    scenario.set_description(fmt::format("petrsim import probe-trace {}", trace_dir));
    const uint64_t groups = uint64_t{std::max<uint32_t>(world, 1)} * scenario.job().samples_per_gpu();
    AddPlaceholderDataset(groups, &scenario);
    summary->push_back(fmt::format(
        "dataset: a placeholder of {} scene(s) of 4 frames, {} groups (world_size {} x samples_per_gpu {} or more; "
        "the trace holds no dataset): use --into SCENARIO to put plan.ddp into a scenario with your dataset",
        scenario.dataset().subdatasets(0).explicit_().scenes_size(),
        2 * scenario.dataset().subdatasets(0).explicit_().scenes_size(), std::max<uint32_t>(world, 1),
        scenario.job().samples_per_gpu()));
    CustomPlan* custom = scenario.mutable_plan()->mutable_custom();
    AddOtherCollectives(rank0, ddp.process_group(), custom, summary);
    *scenario.mutable_plan()->mutable_ddp() = ddp;
    const std::string& backend = rank0.header.backend();
    if (backend == "gloo") scenario.mutable_comm()->set_backend(Comm::gloo);
    if (backend == "nccl") scenario.mutable_comm()->set_backend(Comm::nccl);
  }
  const std::string torch = ProbeTorchRelease(rank0.header);
  if (!torch.empty()) {
    if (const auto version = ParseTorchVersion(torch)) {
      scenario.mutable_comm()->set_torch_version(version->ToString());
    } else {
      summary->push_back(
          fmt::format("note: the job's PyTorch {} is not a release petrsim models ({}); "
                      "comm.torch_version left as it was",
                      torch, SupportedTorchVersions()));
    }
  }
  const uint32_t user_world = scenario.job().world_size();
  if (world > 0) scenario.mutable_job()->set_world_size(world);
  const std::string display = into_path.empty()
                                  ? trace_dir
                                  : fmt::format("{} (with plan.ddp and job.world_size {} from {}{})", into_path,
                                                scenario.job().world_size(), rank0.path,
                                                user_world != scenario.job().world_size()
                                                    ? fmt::format(", which replaced its job.world_size {}", user_world)
                                                    : "");
  ValidateScenario(scenario, display);
  // What `petrsim check` and the simulator check first: the real job builds its sampler.
  const Dataset dataset = BuildDataset(scenario, display);
  CheckSamplerConstructible(scenario, dataset, display);
  return scenario;
}

// Rank 0's rebuilt gradient buckets against the ones `petrsim plan` computes for plan.ddp.
void CheckRebuiltBuckets(const RankFile& rank0, uint32_t which, const Scenario& scenario,
                         std::vector<std::string>* summary) {
  const auto recorded = rank0.rebuilt.find(which);
  const DdpModel& ddp = scenario.plan().ddp();
  if (recorded == rank0.rebuilt.end() || recorded->second.buckets_size() == 0 || ddp.find_unused_parameters()) {
    return;
  }
  const auto version = ParseTorchVersion(scenario.comm().torch_version());
  if (!version) return;
  const DdpCollectives plan = DdpPlan(ddp, *version);
  std::vector<uint64_t> planned, seen;
  for (const Collective& c : plan.backward[kDdpPhases - 1]) planned.push_back(c.numel());
  for (const DdpLayout::Bucket& b : recorded->second.buckets()) seen.push_back(b.numel());
  const auto list = [](const std::vector<uint64_t>& sizes) {
    std::string out;
    for (size_t k = 0; k < sizes.size() && k < 8; ++k) out += (k ? ", " : "") + std::to_string(sizes[k]);
    return sizes.size() > 8 ? out + ", ..." : out;
  };
  if (planned == seen) {
    summary->push_back(
        fmt::format("rebuilt buckets: {} ({} elements), as {} recorded", seen.size(), list(seen), rank0.path));
  } else {
    summary->push_back(fmt::format(
        "note: the rebuilt buckets {} recorded ({}: {} elements) differ from plan.ddp's under torch {} ({}: {} "
        "elements): from iteration 1 on, the plan's gradient buckets are not the job's",
        rank0.path, seen.size(), list(seen), scenario.comm().torch_version(), planned.size(), list(planned)));
  }
}

std::vector<std::string> SummaryHead(const RankFile& rank0, uint32_t which, const Scenario& scenario) {
  const DdpLayout& layout = rank0.construction.at(which);
  const DdpModel& ddp = scenario.plan().ddp();
  uint64_t parameters = 0, buffers = 0;
  for (const DdpTensor& t : layout.tensors()) (t.kind() == DdpTensor::buffer ? buffers : parameters) += 1;
  const std::string torch = ProbeTorchRelease(rank0.header);
  const std::string what = layout.module_class().empty() ? fmt::format("DDP {}", which)
                                                         : fmt::format("DDP {} of {}", which, layout.module_class());
  return {
      fmt::format("plan.ddp: {} ({} on '{}', recorded through the {} path): {} parameter(s) ({} require grad), {} "
                  "buffer(s); bucket_cap_mb {}, find_unused_parameters {}, broadcast_buffers {}, grad_ready_order {}",
                  what, rank0.path, ddp.process_group(), layout.path().empty() ? "unnamed" : layout.path(), parameters,
                  Trainable(layout), buffers, ddp.bucket_cap_mb(), layout.find_unused_parameters(),
                  layout.broadcast_buffers(), ddp.grad_ready_order_size() > 0 ? "recorded" : "not set"),
      fmt::format("comm.torch_version {} ({}), job.world_size {}", scenario.comm().torch_version(),
                  torch.empty() ? "not recorded" : "torch " + torch, scenario.job().world_size())};
}

}  // namespace

ProbeTraceImport ImportProbeTrace(const std::string& trace_dir, const std::string& into_path) {
  const std::vector<RankFile> ranks = ReadRanks(trace_dir);
  const RankFile& rank0 = ranks.front();
  ProbeTraceImport result;
  std::vector<std::string> notes;
  const uint32_t which = CheckRanksAgree(ranks, &notes);
  const DdpModel ddp = BuildDdpModel(rank0, which, &notes);
  result.scenario = BuildScenario(trace_dir, into_path, rank0, ddp, &notes);
  CheckRebuiltBuckets(rank0, which, result.scenario, &notes);
  result.summary = SummaryHead(rank0, which, result.scenario);
  result.summary.insert(result.summary.end(), notes.begin(), notes.end());
  return result;
}

CLI::App* AddProbeTraceImport(CLI::App& import, ProbeTraceImportFlags& flags) {
  CLI::App* command = import.add_subcommand(
      "probe-trace",
      "the model under DistributedDataParallel that petrsim_probe recorded in a real job (its trace directory): "
      "plan.ddp (tensors in state_dict order, bucket_cap_mb, find_unused_parameters, broadcast_buffers, process "
      "group, gradient-ready order), comm.torch_version and job.world_size; with --into merged into your scenario");
  command->add_option("trace_dir", flags.trace_dir, "the probe's trace directory (rank_<r>.pbtrace files)")->required();
  command->add_option("-o,--output", flags.output, "the scenario to write (.pbtxt; .pb binary; .json)")->required();
  command->add_option("--into", flags.into,
                      "a scenario to merge plan.ddp into (e.g. what `petrsim import mmdet3d-config` wrote); "
                      "everything else in it is kept (default: a scenario of its own, whose custom plan holds "
                      "the job's other collectives)");
  return command;
}

int RunProbeTraceImport(const ProbeTraceImportFlags& flags, std::FILE* out) {
  // Never over --into (write the merge elsewhere, then move it) nor over a file that is not an import's output; and,
  // once the traces are read, never over one of them.
  CheckImportOutput(flags.output, flags.into.empty() ? std::vector<std::string>{} : std::vector{flags.into});
  const ProbeTraceImport result = ImportProbeTrace(flags.trace_dir, flags.into);
  const std::string bytes = Serialize(result.scenario, flags.output, result.summary);
  CheckImportOutputAgainstInputsRead(flags.output);
  WriteFileAtomically(flags.output, bytes);
  std::string text = fmt::format("wrote {} ({} bytes)\n", flags.output, bytes.size());
  for (const std::string& line : result.summary) text += "  " + line + "\n";
  text += fmt::format("next: petrsim plan {} --iterations 4\n", flags.output);
  std::fwrite(text.data(), 1, text.size(), out);
  return 0;
}

}  // namespace petrsim
