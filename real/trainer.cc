// The training loop of one rank; see trainer.h.
#include "real/trainer.h"

#include <signal.h>
#include <sys/resource.h>
#include <unistd.h>

#include <torch/csrc/distributed/c10d/TCPStore.hpp>

#include <atomic>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstring>
#include <functional>
#include <iostream>
#include <map>
#include <mutex>
#include <numbers>
#include <optional>
#include <sstream>
#include <thread>

#include <fmt/format.h>

#include "model/data_loader.h"
#include "model/iteration_plan.h"
#include "model/numpy_random.h"
#include "model/outcome.h"
#include "model/resample_policy.h"
#include "model/sampler.h"
#include "model/sampler_watchdog.h"
#include "real/geometry.h"
#include "real/losses.h"
#include "real/rank_comm.h"
#include "real/renderer.h"
#include "real/threaded_loader.h"
#include "trace/rank_writer.h"

namespace petrsim::real {
namespace {

using Clock = std::chrono::steady_clock;

uint64_t Mix(uint64_t a, uint64_t b) {
  uint64_t z = a * 0x9e3779b97f4a7c15ULL + b + 0x632be59bd9b4e019ULL;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

bool StartsWith(const std::string& text, std::string_view prefix) { return text.rfind(prefix, 0) == 0; }

int64_t UnixMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// What a rank tells the others through the store: "unix_ms iteration pg=seq,pg=seq doing".
struct Progress {
  int64_t unix_ms = 0;
  uint64_t iteration = 0;
  std::map<std::string, uint64_t> seqs;  // the last sequence number issued per process group
  std::string doing;

  std::string Encode() const {
    std::string seq_list;
    for (const auto& [group, seq] : seqs) {
      if (!seq_list.empty()) seq_list += ',';
      seq_list += group;
      seq_list += '=';
      seq_list += std::to_string(seq);
    }
    return fmt::format("{} {} {} {}", unix_ms, iteration, seq_list.empty() ? "-" : seq_list, doing);
  }
  static std::optional<Progress> Decode(const std::string& text) {
    std::istringstream in(text);
    Progress p;
    std::string seq_list;
    if (!(in >> p.unix_ms >> p.iteration >> seq_list)) return std::nullopt;
    std::getline(in >> std::ws, p.doing);
    if (seq_list != "-") {
      std::istringstream items(seq_list);
      for (std::string item; std::getline(items, item, ',');) {
        const auto eq = item.rfind('=');
        if (eq == std::string::npos) return std::nullopt;
        p.seqs[item.substr(0, eq)] = std::stoull(item.substr(eq + 1));
      }
    }
    return p;
  }
};

std::string ProgressKey(uint32_t rank) {
  std::string key = "petrsim/progress/";
  key += std::to_string(rank);
  return key;
}
const char kStopKey[] = "petrsim/stop";
std::string AckKey(uint32_t rank) {
  std::string key = "petrsim/stop_read/";
  key += std::to_string(rank);
  return key;
}

// The rank's line to the others, over its own TCPStore client: a monitor thread publishes the
// rank's progress every 100 ms when it changed, watches for a stop of the job by another rank
// (own_process: `stop_now` writes the trace and ends the process), and applies a dead_rank
// fault's SIGKILL at its time.
class JobControl {
 public:
  JobControl(const TrainOptions& options, std::chrono::milliseconds timeout, int64_t kill_at_ns,
             std::function<void(const std::string&)> stop_now)
      : options_(options), kill_at_ns_(kill_at_ns), stop_now_(std::move(stop_now)), start_(Clock::now()) {
    c10d::TCPStoreOptions client;
    client.port = options.master_port;
    client.isServer = false;
    client.waitWorkers = false;
    client.timeout = timeout;
    store_ = c10::make_intrusive<c10d::TCPStore>(options.master_addr, client);
    thread_ = std::thread([this] { Run(); });
  }
  ~JobControl() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      quit_ = true;
    }
    wake_.notify_all();
    thread_.join();
  }

  // The main process blocks (in a collective, or for its next batch) or goes on.
  void Waiting(bool waiting) {
    std::lock_guard<std::mutex> lock(mutex_);
    waiting_ = waiting;
  }

  void Update(const std::function<void(Progress&)>& change) {
    std::lock_guard<std::mutex> lock(mutex_);
    change(progress_);
    dirty_ = true;
  }

  // Stops the job with `reason` (the first stop wins); this rank reports it itself. Waits up
  // to 2 s for the other ranks to acknowledge, so that they have read the reason before this
  // rank's exit (its store server, if it is rank 0; its sockets) makes their collectives fail.
  void Stop(const std::string& reason) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      self_stopped_ = true;
    }
    try {
      {
        std::lock_guard<std::mutex> lock(store_mutex_);
        if (!store_->check({kStopKey})) store_->set(kStopKey, std::vector<uint8_t>(reason.begin(), reason.end()));
      }
      const auto deadline = Clock::now() + std::chrono::seconds(2);
      for (uint32_t r = 0; r < options_.world_size; ++r) {
        while (r != options_.rank && Clock::now() < deadline) {
          {
            std::lock_guard<std::mutex> lock(store_mutex_);
            if (store_->check({AckKey(r)})) break;
          }
          std::this_thread::sleep_for(std::chrono::milliseconds(10));
        }
      }
    } catch (const std::exception&) {
      // The store's server (rank 0) is gone: the others learn it from their collectives.
    }
  }

  // This rank has read another rank's stop.
  void Acknowledge() {
    try {
      std::lock_guard<std::mutex> lock(store_mutex_);
      store_->set(AckKey(options_.rank), std::vector<uint8_t>{1});
    } catch (const std::exception&) {
    }
  }

  // The reason another rank stopped the job, asking the store now.
  std::optional<std::string> StoppedByAnother() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (self_stopped_) return std::nullopt;
      if (stop_seen_) return stop_reason_;
    }
    try {
      std::lock_guard<std::mutex> lock(store_mutex_);
      if (!store_->check({kStopKey})) return std::nullopt;
      const auto value = store_->get(kStopKey);
      return std::string(value.begin(), value.end());
    } catch (const std::exception&) {
      return std::nullopt;
    }
  }

  // Every rank's last published progress (none where it published nothing); nothing at all
  // when the store is unreachable.
  std::optional<std::vector<std::optional<Progress>>> ReadAll() {
    std::vector<std::optional<Progress>> all(options_.world_size);
    try {
      std::lock_guard<std::mutex> lock(store_mutex_);
      for (uint32_t r = 0; r < options_.world_size; ++r) {
        if (!store_->check({ProgressKey(r)})) continue;
        const auto value = store_->get(ProgressKey(r));
        all[r] = Progress::Decode(std::string(value.begin(), value.end()));
      }
    } catch (const std::exception&) {
      return std::nullopt;
    }
    return all;
  }

 private:
  void Run() {
    std::unique_lock<std::mutex> lock(mutex_);
    while (!quit_) {
      wake_.wait_for(lock, std::chrono::milliseconds(100));
      if (quit_) break;
      if (kill_at_ns_ >= 0 && options_.own_process &&
          std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - start_).count() >= kill_at_ns_) {
        ::kill(::getpid(), SIGKILL);  // the scenario's dead_rank fault: no goodbye, as in a real crash
      }
      std::string published;
      if (dirty_) {
        progress_.unix_ms = UnixMs();
        published = progress_.Encode();
        dirty_ = false;
      }
      const bool check_stop = options_.own_process && !self_stopped_ && !stop_seen_;
      lock.unlock();
      std::optional<std::string> stop;
      try {
        std::lock_guard<std::mutex> store_lock(store_mutex_);
        if (!published.empty())
          store_->set(ProgressKey(options_.rank), std::vector<uint8_t>(published.begin(), published.end()));
        if (check_stop && store_->check({kStopKey})) {
          const auto value = store_->get(kStopKey);
          stop = std::string(value.begin(), value.end());
        }
      } catch (const std::exception&) {
      }
      lock.lock();
      if (stop && !self_stopped_ && !stop_seen_) {
        // Read once: the stopping rank may be the store's server, gone right after.
        stop_seen_ = Clock::now();
        stop_reason_ = *stop;
        lock.unlock();
        Acknowledge();
        lock.lock();
      }
      // The rank goes on to where it would block (a collective, or its next batch) before it
      // stops, so that its trace shows where the job's hang would have left it; at most 3 s.
      if (stop_seen_ && !self_stopped_ && (waiting_ || Clock::now() - *stop_seen_ > std::chrono::seconds(3))) {
        const std::string reason = stop_reason_;
        lock.unlock();
        stop_now_(reason);  // does not return
        lock.lock();
      }
    }
  }

  const TrainOptions& options_;
  const int64_t kill_at_ns_;
  std::function<void(const std::string&)> stop_now_;
  const Clock::time_point start_;
  c10::intrusive_ptr<c10d::TCPStore> store_;
  std::mutex store_mutex_;
  std::mutex mutex_;  // progress_, dirty_, self_stopped_, quit_
  std::condition_variable wake_;
  Progress progress_;
  bool dirty_ = true;
  bool self_stopped_ = false;
  bool waiting_ = false;
  std::optional<Clock::time_point> stop_seen_;
  std::string stop_reason_;
  bool quit_ = false;
  std::thread thread_;
};

// One slot of a loaded batch: what the worker drew, loaded and rendered.
struct LoadedSlot {
  SlotDraw draw;
  int64_t final_index = -1;  // -1: padding (no sample)
  std::vector<float> pixels;
  std::vector<int64_t> labels;
  std::vector<std::array<double, 7>> boxes;
  Mat4 ego2global = Mat4::Identity();
};
struct LoadedBatch {
  std::vector<LoadedSlot> slots;
};

// The main process's sampler, drawn in batch order whichever worker asks first (PyTorch draws
// a batch's indices when it dispatches the batch).
class DrawSource {
 public:
  DrawSource(std::unique_ptr<RankSampler> sampler, uint32_t batch_size,
             std::function<void(uint64_t, std::vector<SlotDraw>&)> on_draw)
      : sampler_(std::move(sampler)), batch_size_(batch_size), on_draw_(std::move(on_draw)) {}
  std::vector<SlotDraw> Get(uint64_t batch) {
    std::lock_guard<std::mutex> lock(mutex_);
    while (drawn_ <= batch) {
      std::vector<SlotDraw> draws(batch_size_);
      sampler_->NextBatches(draws);
      on_draw_(drawn_, draws);
      drawn_batches_.emplace(drawn_++, std::move(draws));
    }
    auto node = drawn_batches_.extract(batch);
    return std::move(node.mapped());
  }

 private:
  std::mutex mutex_;
  std::unique_ptr<RankSampler> sampler_;
  const uint32_t batch_size_;
  std::function<void(uint64_t, std::vector<SlotDraw>&)> on_draw_;  // may replace the draws
  uint64_t drawn_ = 0;
  std::map<uint64_t, std::vector<SlotDraw>> drawn_batches_;
};

// LibTorch's default generator is one per process: ranks that are threads of one process
// (tests) build their models one at a time, so each rank's initial parameters are those of a
// process of its own.
std::mutex& ModelInitMutex() {
  static std::mutex mutex;
  return mutex;
}

}  // namespace

double LearningRateAt(const TrainOptions& options, uint64_t iteration, uint64_t iterations) {
  // mmcv: the cosine runs over the whole run (progress = iteration / max_iters) from the base
  // rate to min_lr_ratio x it; during the warmup the rate is that one times
  // 1 - (1 - iteration / warmup_iters) (1 - warmup_ratio).
  const double base = options.learning_rate, target = base * options.min_lr_ratio;
  const double progress = iterations == 0 ? 0.0 : static_cast<double>(iteration) / static_cast<double>(iterations);
  const double regular = target + 0.5 * (base - target) * (1 + std::cos(std::numbers::pi * progress));
  if (iteration >= options.warmup_iterations) return regular;
  const double k = (1 - static_cast<double>(iteration) / static_cast<double>(options.warmup_iterations)) *
                   (1 - options.warmup_ratio);
  return regular * (1 - k);
}

uint64_t HashParameters(torch::nn::Module& module) {
  uint64_t hash = 1469598103934665603ULL;
  for (const auto& p : module.parameters()) {
    const auto t = p.detach().contiguous().to(torch::kCPU);
    const auto* bytes = static_cast<const uint8_t*>(t.data_ptr());
    for (int64_t i = 0; i < t.numel() * static_cast<int64_t>(t.element_size()); ++i) {
      hash = (hash ^ bytes[i]) * 1099511628211ULL;
    }
  }
  return hash;
}

RealJob MakeRealJob(const Scenario& scenario, const ModelConfig& model) {
  RealJob job;
  job.scenario = scenario;
  job.model = model;
  if (!scenario.plan().has_custom()) {
    job.model.decoder_layers = scenario.plan().streampetr().decoder_layers();
  }
  std::lock_guard<std::mutex> lock(ModelInitMutex());
  StreamPetr counted(job.model);
  for (const auto& p : counted->parameters()) job.parameters += static_cast<uint64_t>(p.numel());
  if (!scenario.plan().has_custom()) {
    job.scenario.mutable_plan()->mutable_streampetr()->set_parameters(job.parameters);
  }
  return job;
}

TrainResult TrainRank(const Scenario& input_scenario, const Dataset& dataset, const TrainOptions& options) {
  const RealJob job = MakeRealJob(input_scenario, options.model);
  const Scenario& scenario = job.scenario;
  const ExpandedPlan plan = ExpandPlan(scenario.plan());
  const int64_t timeout_ms =
      options.timeout_ms > 0 ? options.timeout_ms : static_cast<int64_t>(scenario.comm().timeout_ms());
  const auto timeout = std::chrono::milliseconds(timeout_ms);
  const uint32_t rank = options.rank;
  const uint32_t batch_size = scenario.job().samples_per_gpu();

  // The trace: steady-clock nanoseconds since the rank started; records come from the main
  // thread and the loader's workers.
  std::unique_ptr<RankTraceWriter> trace;
  std::mutex trace_mutex;
  if (!options.trace_path.empty()) {
    trace = std::make_unique<RankTraceWriter>(
        options.trace_path, scenario, "", rank, options.world_size, "gloo", "petrsim_train",
        options.trace_ring > 0 ? RankTraceWriter::Mode::kRing : RankTraceWriter::Mode::kStream, options.trace_ring);
    if (options.trace_ring > 0) RankTraceWriter::InstallSignalDump(trace.get());
  }
  const auto t0 = Clock::now();
  const auto now = [&] {
    return static_cast<int64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - t0).count());
  };
  bool trace_finished = false;  // under trace_mutex
  const auto record = [&](TraceRecord r) {
    if (!trace) return;
    r.rank = rank;
    std::lock_guard<std::mutex> lock(trace_mutex);
    if (!trace_finished) trace->Record(r);
  };
  // Collectives issued and not yet completed (under trace_mutex), recorded as pending when the
  // rank stops.
  struct Open {
    const Collective* step = nullptr;
    uint64_t iteration = 0;
    int64_t start_ns = 0;
  };
  std::map<std::pair<std::string, uint64_t>, Open> open_collectives;
  const auto collective_record = [&](const Collective& step, uint64_t seq, const Open& open, bool completed) {
    TraceRecord r;
    r.rank = rank;
    r.kind = TraceKind::kCollective;
    r.worker = step.blocking() ? kMainProcess : kAsyncCollectives;
    r.start_ns = open.start_ns;
    r.end_ns = std::max(now(), open.start_ns);
    r.iteration = open.iteration;
    r.process_group = step.process_group();
    r.seq = seq;
    r.op = step.op();
    r.numel = step.numel();
    r.dtype = step.dtype();
    r.completed = completed;
    r.started_ns = completed ? open.start_ns : -1;
    r.text = step.name();
    return r;
  };
  // The rank's last words: its pending collectives, an instant and its exit; then the trace is
  // closed.
  const auto finish_trace = [&](TraceKind kind, uint64_t iteration, const std::string& text, const std::string& exit) {
    if (!trace) return;
    std::lock_guard<std::mutex> lock(trace_mutex);
    if (trace_finished) return;
    trace_finished = true;
    for (const auto& [key, open] : open_collectives)
      trace->Record(collective_record(*open.step, key.second, open, false));
    TraceRecord r;
    r.rank = rank;
    r.start_ns = r.end_ns = now();
    r.iteration = iteration;
    if (!text.empty()) {
      r.kind = kind;
      r.text = text;
      trace->Record(r);
    }
    r.kind = TraceKind::kProcessExit;
    r.text = exit;
    trace->Record(r);
    trace->Finish();
  };
  std::atomic<uint64_t> current_iteration{0};

  // Faults: dead_rank is a real SIGKILL (own_process), a straggler sleeps; the others are the
  // simulator's only.
  int64_t kill_at_ns = -1;
  std::map<uint64_t, int64_t> straggle_ns;
  for (const Fault& fault : scenario.faults()) {
    if (fault.has_dead_rank() && fault.dead_rank().rank() == rank) {
      kill_at_ns = static_cast<int64_t>(fault.dead_rank().at_ns());
    } else if (fault.has_straggler() && fault.straggler().rank() == rank) {
      straggle_ns[fault.straggler().iteration()] += static_cast<int64_t>(fault.straggler().delay_ns());
    } else if (rank == 0 && !fault.has_dead_rank() && !fault.has_straggler()) {
      std::cerr << "petrsim_train: note: the fault " << fault.ShortDebugString()
                << " is the simulator's only; the real run ignores it\n";
    }
  }

  c10d::TCPStoreOptions store_options;
  store_options.port = options.master_port;
  store_options.isServer = options.serve_store && rank == 0;
  store_options.numWorkers = options.world_size;
  store_options.waitWorkers = false;
  store_options.timeout = timeout;
  auto store = c10::make_intrusive<c10d::TCPStore>(options.master_addr, store_options);
  JobControl control(options, timeout, kill_at_ns, [&](const std::string& reason) {
    std::cerr << "petrsim_train: rank " << rank << " stops: " << reason << "\n";
    finish_trace(TraceKind::kWatchdog, current_iteration, "", "stopped by another rank (exit 1): " + reason);
    std::cerr.flush();
    std::cout.flush();
    std::_Exit(1);
  });
  std::vector<std::string> group_names;
  for (const auto* list : {&plan.startup, &plan.per_iteration}) {
    for (const Collective& c : *list) group_names.push_back(c.process_group());
  }
  for (const auto& p : plan.periodic) group_names.push_back(p.collective().process_group());
  RankComm comm(store, rank, options.world_size, timeout, scenario.comm().backend(), options.local_rank,
                options.master_addr, group_names);

  std::unique_lock<std::mutex> init_lock(ModelInitMutex());
  torch::manual_seed(static_cast<uint64_t>(scenario.job().seed()));
  StreamPetr model(job.model);
  init_lock.unlock();
  const auto params = model->parameters();
  torch::optim::AdamW optimizer(params, torch::optim::AdamWOptions(options.learning_rate).weight_decay(0.01));

  // Collectives: issued with the rank's progress published, recorded from issue to completion.
  // A failure (a peer gone, the timeout) is the collective watchdog's: the rank says which
  // ranks never arrived at that sequence number and what they were doing, stops the job and
  // fails; or, when another rank stopped the job first, says so and fails.
  TrainResult result;
  std::map<std::string, uint64_t> seqs;
  struct Issued {
    const Collective* step = nullptr;
    uint64_t seq = 0;
    uint64_t iteration = 0;
    int64_t start_ns = 0;
    RankComm::Pending pending;
    std::function<void(const at::Tensor&)> done;
  };
  const auto fail = [&](const Issued& issued, const std::string& error) {
    if (const auto reason = control.StoppedByAnother()) {
      control.Acknowledge();
      const std::string why = "stopped by another rank: " + *reason;
      finish_trace(TraceKind::kWatchdog, issued.iteration, "", why + " (exit 1)");
      throw JobStoppedError(why);
    }
    const Collective& step = *issued.step;
    const double waited_s = static_cast<double>(now() - issued.start_ns) / 1e9;
    std::string missing;
    const auto read = control.ReadAll();
    const std::vector<std::optional<Progress>> all =
        read.value_or(std::vector<std::optional<Progress>>(options.world_size));
    if (!read) missing = "; the TCPStore (served by rank 0) is unreachable, so rank 0 is gone";
    for (uint32_t r = 0; r < options.world_size && read; ++r) {
      if (r == rank) continue;
      if (!all[r]) {
        missing += fmt::format("; rank {} published no progress", r);
        continue;
      }
      const Progress& p = *all[r];
      const auto it = p.seqs.find(step.process_group());
      const uint64_t at = it == p.seqs.end() ? 0 : it->second;
      if (at >= issued.seq) continue;
      missing += fmt::format("; rank {} never arrived: last heard {:.1f} s before, at seq {} (iteration {}), {}", r,
                             static_cast<double>(UnixMs() - p.unix_ms) / 1e3, at, p.iteration, p.doing);
    }
    if (missing.empty()) missing = "; every other rank had issued it";
    const std::string first_line = error.substr(0, error.find('\n'));
    const std::string report = fmt::format(
        "collective watchdog: rank {}: {} '{}' ({} seq {}, iteration {}) failed after {:.1f} s (timeout {} ms): {}{}",
        rank, OpTypeName(step.op()), step.name(), step.process_group(), issued.seq, issued.iteration, waited_s,
        timeout_ms, first_line, missing);
    control.Stop(report);
    finish_trace(TraceKind::kWatchdog, issued.iteration, report, "stopped by the collective watchdog (exit 1)");
    throw CollectiveError(report);
  };
  const auto launch = [&](const Collective& step, uint64_t iteration, const at::Tensor& input,
                          std::function<void(const at::Tensor&)> done) {
    Issued issued;
    issued.step = &step;
    issued.seq = ++seqs[step.process_group()];
    issued.iteration = iteration;
    issued.done = std::move(done);
    control.Update([&](Progress& p) {
      p.iteration = iteration;
      p.seqs[step.process_group()] = issued.seq;
      p.doing = fmt::format("in {} '{}'", OpTypeName(step.op()), step.name());
    });
    issued.start_ns = now();
    ++result.collectives;
    if (trace) {
      std::lock_guard<std::mutex> lock(trace_mutex);
      open_collectives[{step.process_group(), issued.seq}] = Open{&step, iteration, issued.start_ns};
    }
    try {
      issued.pending = comm.Launch(step, input);
    } catch (const std::exception& error) {
      fail(issued, error.what());
    }
    return issued;
  };
  const auto complete = [&](Issued& issued) {
    try {
      control.Waiting(true);
      issued.pending.Wait();
      control.Waiting(false);
    } catch (const std::exception& error) {
      fail(issued, error.what());
    }
    if (trace) {
      std::lock_guard<std::mutex> lock(trace_mutex);
      const auto key = std::make_pair(issued.step->process_group(), issued.seq);
      const Open open = open_collectives[key];
      open_collectives.erase(key);
      if (!trace_finished) trace->Record(collective_record(*issued.step, issued.seq, open, true));
    }
    if (issued.done) issued.done(issued.pending.result());
  };
  const auto zeros = [](const Collective& step) {
    return torch::zeros({static_cast<int64_t>(std::max<uint64_t>(1, step.numel()))}, TorchDtype(step.dtype()));
  };

  // Startup: the seed broadcasts, then DDP's: every rank takes rank 0's parameters.
  for (const Collective& step : plan.startup) {
    at::Tensor input;
    std::function<void(const at::Tensor&)> done;
    if (StartsWith(step.name(), "sync_random_seed")) {
      input = torch::full({1}, static_cast<int64_t>(scenario.job().seed()), TorchDtype(step.dtype()));
    } else if (step.name() == "DDP parameter broadcast") {
      std::vector<torch::Tensor> flat;
      for (const auto& p : params) flat.push_back(p.detach().flatten());
      input = torch::cat(flat);
      done = [&](const at::Tensor& all) {
        torch::NoGradGuard no_grad;
        int64_t at = 0;
        for (auto& p : params) {
          p.copy_(all.narrow(0, at, p.numel()).view_as(p).to(p.dtype()));
          at += p.numel();
        }
      };
    } else {
      input = zeros(step);
    }
    Issued issued = launch(step, 0, input, done);
    complete(issued);
  }

  // Where each gradient bucket starts in the flattened gradients (reverse parameter order).
  std::map<const Collective*, int64_t> bucket_offset;
  int64_t bucket_elements = 0;
  int64_t loss_terms = 0;
  for (const Collective& step : plan.per_iteration) {
    if (StartsWith(step.name(), "DDP gradient bucket")) {
      bucket_offset[&step] = bucket_elements;
      bucket_elements += static_cast<int64_t>(step.numel());
    }
    loss_terms += StartsWith(step.name(), "_parse_losses: loss term");
  }
  result.gradient_buckets = bucket_offset.size();
  int64_t parameter_elements = 0;
  for (const auto& p : params) parameter_elements += p.numel();
  if (bucket_offset.empty() && options.world_size > 1 && rank == 0) {
    std::cerr << "petrsim_train: note: the plan has no 'DDP gradient bucket' step, so the ranks' gradients are "
                 "not synchronised\n";
  }

  // The data: rendered from the scenario's frames.
  const DataLoaderShape shape = MakeDataLoaderShape(scenario, dataset);
  const auto policy = MakeResamplePolicy(scenario, dataset);
  const auto rig = SurroundRig(static_cast<int>(job.model.image_width), static_cast<int>(job.model.image_height));
  std::vector<double> inverses;
  for (const Camera& camera : rig) {
    const Mat4 m = Inverse(camera.Lidar2Img());
    inverses.insert(inverses.end(), m.m.begin(), m.m.end());
  }
  const auto img2lidar = torch::tensor(inverses, torch::kFloat64).view({1, 6, 4, 4}).repeat({batch_size, 1, 1, 1});
  const auto weights = torch::tensor({1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 0.2, 0.2}, torch::kFloat32);
  StreamingMemory memory(batch_size, job.model.memory_len, job.model.channels);
  std::vector<Mat4> last_pose(batch_size, Mat4::Identity());

  DrawSource draws(MakeRankSampler(scenario, dataset, rank), batch_size,
                   [&](uint64_t batch, std::vector<SlotDraw>& drawn) {
                     if (options.replay != nullptr) {
                       for (uint32_t slot = 0; slot < drawn.size(); ++slot) {
                         const auto index = options.replay->SampleIndex(rank, batch, slot);
                         if (index && *index >= 0 && *index < dataset.size()) {
                           drawn[slot] = SlotDraw{*index, dataset.group_of(*index)};
                         }
                       }
                     }
                     const int64_t t = now();
                     for (uint32_t slot = 0; slot < drawn.size(); ++slot) {
                       if (drawn[slot].index < 0) continue;
                       TraceRecord r;
                       r.kind = TraceKind::kSamplerDraw;
                       r.start_ns = r.end_ns = t;
                       r.iteration = batch;
                       r.slot = slot;
                       r.index = drawn[slot].index;
                       r.group = drawn[slot].group;
                       record(r);
                     }
                   });
  // Per worker (or the main process) the numpy RNG PyTorch's worker_init_fn seeds; reseeded
  // when an epoch sampler's DataLoader starts new workers.
  std::vector<NumpyRandomState> rngs;
  const auto seed_rngs = [&] {
    rngs.clear();
    if (shape.workers == 0) {
      rngs.emplace_back(scenario.job().seed());
    } else {
      for (uint32_t w = 0; w < shape.workers; ++w) {
        rngs.emplace_back(WorkerNumpySeed(shape.workers, rank, w, scenario.job().seed()));
      }
    }
  };
  const uint32_t pipeline_draws = scenario.resample().pipeline_draws_per_attempt();
  uint64_t epoch_start = 0;
  const auto load = [&](int32_t worker, uint64_t in_epoch) {
    const uint64_t batch = epoch_start + in_epoch;
    const std::vector<SlotDraw> drawn = draws.Get(batch);
    NumpyRandomState& rng = rngs[worker < 0 ? 0 : worker];
    LoadedBatch loaded;
    for (uint32_t slot = 0; slot < batch_size; ++slot) {
      LoadedSlot& out = loaded.slots.emplace_back();
      out.draw = drawn[slot];
      if (out.draw.index < 0) continue;  // padding of a short last batch
      const int64_t load_start = now();
      const RecordedLoad* recorded = options.replay != nullptr ? options.replay->Load(rank, batch, slot) : nullptr;
      WatchedItem item;
      if (recorded != nullptr && !recorded->livelock && !recorded->error && recorded->final_index >= 0 &&
          recorded->final_index < dataset.size()) {
        item.result.index = recorded->final_index;
        item.result.attempts = recorded->attempts;
        item.result.outcome = GetItemOutcome::kAccepted;
      } else {
        item = WatchedGetItem(dataset, *policy, out.draw.index, rng, pipeline_draws, rank, worker, batch, slot);
      }
      if (item.livelock) {
        // Recorded now; reported in user terms, stopping the whole job, when the main process
        // asks for this batch (the moment the real job would start to hang).
        const std::string report = "sampler watchdog: " + item.livelock->Describe();
        TraceRecord r;
        r.kind = TraceKind::kLivelock;
        r.worker = worker;
        r.start_ns = r.end_ns = now();
        r.iteration = batch;
        r.slot = slot;
        r.index = out.draw.index;
        r.final_index = item.result.index;
        r.attempts = item.result.attempts;
        r.text = report;
        record(r);
        throw SampleLivelockError(item.livelock->Describe());
      }
      TraceRecord r;
      r.kind = TraceKind::kLoad;
      r.worker = worker;
      r.start_ns = load_start;
      r.iteration = batch;
      r.slot = slot;
      r.index = out.draw.index;
      r.final_index = item.result.index;
      r.attempts = item.result.attempts;
      out.final_index = item.result.index;
      const FrameInfo& frame = dataset.frame(out.final_index);
      const uint32_t boxes = std::min<uint32_t>(frame.gt_count, options.boxes_max);
      const RenderedFrame rendered = SceneFrame(Mix(scenario.job().seed(), frame.scene), frame.frame_in_scene, boxes);
      out.pixels = Render(rig, rendered.boxes);
      for (const RenderBox& b : rendered.boxes) {
        out.labels.push_back(b.cls);
        out.boxes.push_back({b.x, b.y, b.z, b.w, b.l, b.h, b.yaw});
      }
      out.ego2global = rendered.ego2global;
      r.end_ns = now();
      record(r);
    }
    TraceRecord ready;
    ready.kind = TraceKind::kBatchReady;
    ready.worker = worker;
    ready.start_ns = ready.end_ns = now();
    ready.iteration = batch;
    record(ready);
    return loaded;
  };

  std::unique_ptr<ThreadedLoader<LoadedBatch>> loader;
  std::vector<Issued> in_flight;  // non-blocking collectives of this iteration
  int64_t first_iteration_end_ns = 0;
  for (uint64_t iteration = 0; iteration < options.iterations; ++iteration) {
    current_iteration = iteration;
    if (!loader || shape.RestartsAt(iteration)) {
      loader.reset();
      epoch_start = iteration;
      seed_rngs();
      const uint64_t epoch_batches = shape.batches_per_epoch == 0
                                         ? options.iterations - iteration
                                         : std::min(shape.batches_per_epoch, options.iterations - iteration);
      loader = std::make_unique<ThreadedLoader<LoadedBatch>>(shape.workers, scenario.job().prefetch_factor(),
                                                             epoch_batches, load);
    }
    const int64_t iteration_start = now();
    control.Update([&](Progress& p) {
      p.iteration = iteration;
      p.doing = shape.workers == 0 ? fmt::format("loading batch {} itself", iteration)
                                   : fmt::format("waiting for batch {} from DataLoader worker {}", iteration,
                                                 shape.WorkerOf(iteration));
    });
    std::optional<LoadedBatch> batch;
    try {
      control.Waiting(true);
      while (!(batch = loader->Next(std::chrono::milliseconds(100)))) {
        if (const auto reason = control.StoppedByAnother()) {
          control.Acknowledge();
          finish_trace(TraceKind::kWatchdog, iteration, "", "stopped by another rank (exit 1): " + *reason);
          throw JobStoppedError("stopped by another rank: " + *reason);
        }
      }
    } catch (const SampleLivelockError& error) {
      control.Stop(std::string("sampler watchdog: ") + error.what());
      finish_trace(TraceKind::kWatchdog, iteration, "", "stopped by the sampler watchdog (exit 1)");
      throw;
    }
    control.Waiting(false);
    if (const auto it = straggle_ns.find(iteration); it != straggle_ns.end()) {
      control.Update([&](Progress& p) { p.doing = fmt::format("straggling (a fault) in iteration {}", iteration); });
      std::this_thread::sleep_for(std::chrono::nanoseconds(it->second));
    }
    control.Update([&](Progress& p) { p.doing = fmt::format("computing iteration {}", iteration); });

    std::vector<torch::Tensor> images, labels, targets;
    std::vector<int64_t> prev_exists(batch_size, 0);
    std::vector<double> motions;  // per slot a 4 x 4: the ego motion, or the identity where the stream broke
    for (uint32_t slot = 0; slot < batch_size; ++slot) {
      const LoadedSlot& s = batch->slots[slot];
      const int64_t pixels = 6 * 3 * job.model.image_height * job.model.image_width;
      images.push_back(s.pixels.empty() ? torch::zeros({pixels})
                                        : torch::tensor(std::vector<float>(s.pixels.begin(), s.pixels.end())));
      images.back() = images.back().view({6, 3, job.model.image_height, job.model.image_width});
      labels.push_back(torch::tensor(s.labels, torch::kInt64));
      targets.push_back(s.boxes.empty() ? torch::zeros({0, kBoxTerms}) : BoxTargets(s.boxes, job.model.range));
      const bool frame_prev = s.final_index >= 0 && dataset.frame(s.final_index).prev_exists;
      prev_exists[slot] = frame_prev && s.final_index == s.draw.index;
      const Mat4 motion = prev_exists[slot] ? EgoMotion(last_pose[slot], s.ego2global) : Mat4::Identity();
      last_pose[slot] = s.ego2global;
      motions.insert(motions.end(), motion.m.begin(), motion.m.end());
    }
    // The memory enters the frame: carried by the ego motion, or cleared where the stream broke;
    // the model sees the motion as its top 3 rows and the time step.
    const auto dt = torch::full({batch_size}, 0.5);
    const auto matrices = torch::tensor(motions, torch::kFloat64).view({batch_size, 4, 4}).to(torch::kFloat32);
    memory.PreUpdate(matrices, torch::tensor(prev_exists).to(torch::kBool), dt);
    const auto motion_vector = torch::cat({matrices.narrow(1, 0, 3).flatten(1), dt.unsqueeze(1)}, 1);
    const auto prediction = model(torch::stack(images), img2lidar, memory, motion_vector);
    int64_t positives = 0;
    for (const auto& l : labels) positives += l.size(0);

    // The plan, step by step; the losses when a step first needs them, the backward pass when
    // the first gradient bucket does.
    std::optional<double> avg_factor;
    std::vector<torch::Tensor> layer_terms;  // per layer: classification, regression
    torch::Tensor total;
    torch::Tensor flat_grads;
    const auto losses = [&] {
      if (total.defined()) return;
      const double factor = avg_factor.value_or(std::max<double>(1.0, static_cast<double>(positives)));
      total = torch::zeros({});
      for (size_t layer = 0; layer < prediction.logits.size(); ++layer) {
        torch::Tensor cls = torch::zeros({}), reg = torch::zeros({});
        for (uint32_t slot = 0; slot < batch_size; ++slot) {
          const LayerLoss l = DetectionLoss(prediction.logits[layer][slot], prediction.boxes[layer][slot], labels[slot],
                                            targets[slot], weights, factor);
          cls = cls + l.classification;
          reg = reg + l.regression;
        }
        layer_terms.push_back(cls);
        layer_terms.push_back(reg);
        total = total + cls + reg;
      }
    };
    const auto backward = [&] {
      if (flat_grads.defined()) return;
      losses();
      optimizer.zero_grad();
      total.backward();
      std::vector<torch::Tensor> grads;
      for (auto it = params.rbegin(); it != params.rend(); ++it) {
        grads.push_back(it->grad().defined() ? it->grad().flatten() : torch::zeros({it->numel()}));
      }
      if (bucket_elements > parameter_elements) grads.push_back(torch::zeros({bucket_elements - parameter_elements}));
      flat_grads = torch::cat(grads);
    };
    int64_t term = 0;
    std::optional<double> logged;
    for (const Collective& step : plan.per_iteration) {
      if (step.only_when_local_batch_has_gt() && positives == 0) continue;
      at::Tensor input;
      std::function<void(const at::Tensor&)> done;
      const std::string& name = step.name();
      if (StartsWith(name, "reduce_mean(num_total_pos)")) {
        input = torch::full({1}, static_cast<double>(positives) / options.world_size, TorchDtype(step.dtype()));
        if (!avg_factor) {
          done = [&](const at::Tensor& sum) { avg_factor = std::max(1.0, sum.to(torch::kFloat64).item<double>()); };
        }
      } else if (name == "_parse_losses: len(log_vars)") {
        input = torch::full({1}, loss_terms, TorchDtype(step.dtype()));
      } else if (StartsWith(name, "_parse_losses: loss term")) {
        losses();
        input = term < static_cast<int64_t>(layer_terms.size()) ? layer_terms[term].detach().reshape({1})
                                                                : torch::zeros({1});
        ++term;
      } else if (name == "_parse_losses: total loss") {
        losses();
        input = total.detach().reshape({1});
        done = [&logged, world = options.world_size](const at::Tensor& sum) {
          logged = sum.to(torch::kFloat64).item<double>() / world;
        };
      } else if (const auto it = bucket_offset.find(&step); it != bucket_offset.end()) {
        backward();
        const int64_t offset = it->second;
        const int64_t numel = static_cast<int64_t>(step.numel());
        input = flat_grads.narrow(0, offset, numel);
        done = [&flat_grads, offset, numel](const at::Tensor& reduced) {
          flat_grads.narrow(0, offset, numel).copy_(reduced);
        };
      } else {
        input = zeros(step);
      }
      Issued issued = launch(step, iteration, input, std::move(done));
      if (step.blocking()) {
        complete(issued);
      } else {
        in_flight.push_back(std::move(issued));
      }
    }
    backward();
    for (Issued& issued : in_flight) complete(issued);
    in_flight.clear();
    if (!bucket_offset.empty()) {
      // DDP: the summed gradients, averaged, back into each parameter's .grad.
      flat_grads.div_(static_cast<double>(options.world_size));
      int64_t at = 0;
      for (auto it = params.rbegin(); it != params.rend(); ++it) {
        if (it->grad().defined()) it->grad().copy_(flat_grads.narrow(0, at, it->numel()).view_as(*it));
        at += it->numel();
      }
    }
    if (options.grad_clip_norm > 0) torch::nn::utils::clip_grad_norm_(params, options.grad_clip_norm, 2.0);
    const double lr = LearningRateAt(options, iteration, options.iterations);
    for (auto& group : optimizer.param_groups()) static_cast<torch::optim::AdamWOptions&>(group.options()).lr(lr);
    optimizer.step();
    result.losses.push_back(total.item<double>());
    result.logged_losses.push_back(logged.value_or(result.losses.back()));
    result.learning_rates.push_back(lr);
    for (const PeriodicCollective& periodic : plan.periodic) {
      if ((iteration + 1) % periodic.every_iterations() != 0) continue;
      const Collective& step = periodic.collective();
      // mmcv's logger reduces the peak memory (MiB) to rank 0 with MAX.
      at::Tensor input = zeros(step);
      if (StartsWith(step.name(), "logger reduce")) {
        rusage usage{};
        ::getrusage(RUSAGE_SELF, &usage);
        input.fill_(static_cast<double>(usage.ru_maxrss / 1024));
      }
      Issued issued = launch(step, iteration, input, nullptr);
      complete(issued);
    }
    TraceRecord r;
    r.kind = TraceKind::kIteration;
    r.start_ns = iteration_start;
    r.end_ns = now();
    if (iteration == 0) first_iteration_end_ns = r.end_ns;
    if (iteration > 0) result.step_ms = static_cast<double>(r.end_ns - first_iteration_end_ns) / 1e6 / iteration;
    r.iteration = iteration;
    record(r);
  }
  loader.reset();
  result.parameters_hash = HashParameters(*model);
  control.Update([&](Progress& p) { p.doing = "finished its iterations"; });
  finish_trace(TraceKind::kWatchdog, options.iterations, "", "finished its iterations (exit 0)");
  return result;
}

}  // namespace petrsim::real
