// `petrsim diagnose`: a post-mortem of a hung or failed job from its per-rank recordings,
// petrsim traces (sim or real backend) or PyTorch Flight Recorder dumps, read into one model.
//
// Data flow: LoadRecordings (files → Recordings: per rank, its collective calls in program
// order, how far it got on each process group, and, from petrsim traces, its DataLoader spins
// and death) → Diagnose (Recordings → Diagnosis) → FormatDiagnosis / DiagnosisJson.
//
// The analysis, per process group: the first collective (lowest sequence number) that some
// member rank recorded but not every member joined, with the missing ranks; op, dtype and size
// mismatches at one sequence number (desync, with the culprit ranks: those that differ from
// the majority). A happens-before graph (Boost.Graph; vertices: the collective instances not
// complete everywhere; edges: program order on each rank) decides which of those first
// collectives are root causes: for a missing rank, a stuck collective that another stuck
// collective the same rank is missing from happens before is a consequence, not a root
// (Megatron's tensor-parallel all_reduce waits because the expert-parallel all_to_all before it
// never completed). A wait-for graph over ranks (r waits for m when r pends in a collective m
// never joined) gives wait-for cycles (strong components). Where the recordings hold sampler
// and worker events, the cause on a missing rank is said in user terms.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "check/fixes.h"
#include "check/preflight.h"
#include "data/stuck_getitem.h"
#include "formats/torch_logs/training_log.h"
#include "proto/scenario.pb.h"
#include "replay/diagnose_stall.h"

namespace petrsim {

// One collective call of one rank.
struct CallRecord {
  std::string group;  // process group name (Flight Recorder: its global id, e.g. "74")
  int64_t seq = 0;    // per-group collective sequence number, from 1
  std::string op;     // "nccl:all_to_all" (Flight Recorder) or "ALLREDUCE" (petrsim)
  std::vector<std::vector<int64_t>> input_sizes, output_sizes;
  std::string dtype;
  int64_t time_ns = 0;  // when it was issued (created)
  bool completed = false;
  // petrsim traces: the training iteration and plan step.
  std::optional<uint64_t> iteration;
  std::string step;
};

// How far a rank got on one process group.
struct GroupProgress {
  int64_t last_enqueued = -1;  // -1: unknown
  int64_t last_completed = -1;
};

// A DataLoader worker that never returned (petrsim traces).
struct RankRecording {
  uint32_t rank = 0;
  bool present = false;  // a file of this rank was read
  std::string source;    // its path
  // In program order. Flight Recorder dumps: every entry; petrsim traces: the calls not
  // complete on this rank (the completed ones only move `progress`), so that a long trace costs
  // memory for what is still pending, not for its length.
  std::vector<CallRecord> calls;
  uint64_t calls_read = 0;                        // collective calls in the file
  uint64_t events_read = 0;                       // events of any kind (petrsim traces) or entries (dumps)
  std::map<std::string, GroupProgress> progress;  // by group name
  std::vector<StuckGetitem> spins;                // getitems recorded spinning
  std::vector<WorkerStall> stalls;                // the probe's stall events (diagnose_stall.h)
  std::optional<std::string> died;                // why, if it died (or was killed: "killed by SIGTERM")
  int64_t died_ns = 0;                            // when
  std::optional<std::string> partial;             // the file was cut short: what went wrong
  uint64_t records_dropped = 0;                   // the writer left out this many (record limit, ring)
  // petrsim traces: the watchdog events (the first one's line and time), and the process's end as recorded
  // (process_exit's text; none: the trace does not say how the process ended).
  uint64_t watchdog_events = 0;
  std::string first_watchdog;
  int64_t first_watchdog_ns = 0;
  std::optional<std::string> exit;
  bool exit_expected = false;  // a petrsim_train trace, which always ends with process_exit when its rank ends
  // Records refused as invalid (a Flight Recorder entry with a negative collective_seq_id): how many, the first.
  uint64_t invalid_records = 0;
  std::string first_invalid;
};

// A file of the recordings that could not be used: its path, the rank its name gives (-1: none), and why.
struct RefusedFile {
  std::string path;
  int64_t rank = -1;
  std::string why;
};

struct GroupInfo {
  std::string desc;
  std::vector<uint32_t> members;  // ranks, ascending
};

struct Recordings {
  std::string format;  // "flight_recorder" or "petrsim"
  uint32_t world_size = 0;
  std::map<std::string, GroupInfo> groups;
  std::vector<RankRecording> ranks;  // index = rank
  std::optional<Scenario> scenario;  // petrsim traces carry the scenario they ran
  std::string backend;               // petrsim traces: sim, gloo or nccl
  // Files that could not be read at all (the error, naming the file and offset; their rank is
  // then without a file) and other notes on what was inferred.
  std::vector<std::string> notes;
  std::vector<RefusedFile> refused;  // the files refused (each also in `notes`)
  int64_t end_ns = 0;                // the latest time any event ends
  // The origin reports measure times from: 0 for the simulator's virtual clock, the earliest event
  // of any rank for traces on a host's steady clock (whose raw values mean nothing to a user).
  int64_t origin_ns = 0;
  // The PyTorch release the recordings name, and where: a probe trace's header ("petrsim_probe 0.1 (torch 1.13.1)"),
  // a Flight Recorder dump's version fields. "" when they name none.
  std::string torch_version, torch_version_from;
};

// Reads PATHS: each a directory (every regular file in it: rank_<r>.pbtrace files, or Flight
// Recorder dumps) or a file. Throws ScenarioError naming the file on bad input that leaves
// nothing to analyse; a file cut short is read up to the cut and noted as partial; a file that
// cannot be read at all, among readable ones, is noted and its rank counted as without a file.
Recordings LoadRecordings(const std::vector<std::string>& paths);

struct StuckCollective {
  std::string group, desc;
  int64_t seq = 0;
  std::string op;
  std::vector<std::vector<int64_t>> sizes;  // input sizes of the lowest rank that recorded it
  std::string dtype;
  std::vector<uint32_t> missing_ranks;  // members that never joined it, and members without a file
  std::vector<uint32_t> waiting_ranks;  // members that recorded it and pend in it
  int64_t time_ns = 0;                  // earliest issue among the waiting ranks
  std::optional<uint64_t> iteration;
  std::string step;
  bool root = true;                    // false: a consequence of another stuck collective of a missing rank
  std::vector<uint32_t> without_file;  // the missing ranks that left no file (suspects)
  bool only_without_file = false;      // every member with a file joined; only those are left
};

struct DesyncFinding {
  std::string group;
  int64_t seq = 0;
  std::string field;  // "op", "dtype" or "sizes"
  std::string expected, found;
  std::vector<uint32_t> culprit_ranks;
  std::string expected_step, found_step;  // petrsim traces: the plan steps of the two calls
};

// The cause on a missing rank, in fields (the JSON's "cause_detail"; `cause` says it in prose).
struct CauseDetail {
  // "livelock" (a DataLoader getitem that never returns), "died", "desync", "never_reached" (a training log: the
  // first rank that printed no timeout; the log says no more)
  std::string kind;
  uint32_t rank = 0;
  std::optional<StuckGetitem> getitem;  // livelock: worker, batch, slot, index; the pool when `pool_known`
  std::optional<std::string> died;      // died: why
  bool pool_known = false;              // the trace carried its scenario, so the pool was found
};

// What a rank's recording says of its end or alarm: a death (a signal, a failed exit: the trace's text) or a
// watchdog (its first line, and how many the rank recorded).
struct RankEvent {
  uint32_t rank = 0;
  std::string what;
  int64_t time_ns = 0;  // from the recordings' origin
  uint64_t count = 1;
};

// A rank whose file was read but cannot be taken as a whole record of it: cut short, without an event, without the
// end its writer always records, or with records refused as invalid.
struct IncompleteRank {
  uint32_t rank = 0;
  std::string why;
};

struct Diagnosis {
  std::string format;
  uint32_t world_size = 0;
  std::vector<StuckCollective> stuck;  // root ones first, then consequences; by time
  std::vector<DesyncFinding> desyncs;
  std::vector<std::vector<uint32_t>> cycles;  // wait-for cycles among ranks
  std::vector<uint32_t> ranks_without_file;
  std::vector<std::string> partial;  // notes on files cut short
  std::optional<std::string> cause;  // the user-level cause on a missing rank, if known
  std::optional<CauseDetail> cause_detail;
  std::optional<Scenario> recorded_scenario;  // petrsim traces: the scenario the job ran (its effective plan)
  uint64_t calls = 0;                         // collective calls read
  uint64_t events = 0;                        // events (or dump entries) read
  uint64_t graph_vertices = 0, graph_edges = 0;
  // Training logs (format "training_log"): what the log says beyond the collectives, per rank.
  std::optional<TrainingLog> log;
  std::vector<uint32_t> suspects;                 // ranks of the world that printed no timeout
  bool world_size_known = true;                   // false: the log names no world size (at least `world_size` ranks)
  std::optional<IterationBound> hang_iterations;  // from the last iteration logged and the log interval
  std::string torch_version, torch_version_from;  // Recordings' (traces and dumps); a log's are in `log`
  std::vector<WorkerStall> stalls;                // the probe's stall events of every rank (diagnose_stall.h)
  // The job's health beyond the collectives (diagnose_health.cc): deaths and failed exits, watchdog events, spinning
  // workers (ranks), files refused and ranks whose file is incomplete.
  std::vector<RankEvent> deaths, watchdogs;
  std::vector<uint32_t> spinning_ranks;
  std::vector<RefusedFile> refused_files;
  std::vector<IncompleteRank> incomplete;
};

// `diagnose`'s verdict and exit code: "failed" (1: a stuck collective, a desync, a death or failed exit, a watchdog,
// a spinning worker), else "incomplete" (3: a rank without a usable file, a file refused, cut short or with invalid
// records: the job's health cannot be told), else "healthy" (0: every rank's recording is complete and shows no
// failure). Training logs: "failed" with a timeout, else "healthy".
std::string DiagnosisVerdict(const Diagnosis& diagnosis);
int DiagnosisExitCode(const Diagnosis& diagnosis);

Diagnosis Diagnose(const Recordings& recordings);

// A training log's diagnosis (formats/torch_logs/training_log.h): per process group and sequence number (where printed)
// the collective the ranks that timed out wait in, missing the ranks of the world that printed no timeout. The world
// size is the log's when it says one (a different `given_world_size`, the scenario's or --world-size, is noted), else
// `given_world_size` when set; when neither, the ranks seen (world_size_known false).
Diagnosis DiagnoseTrainingLog(TrainingLog log, std::optional<uint32_t> given_world_size);

// `diagnose --scenario S`: the recordings come from a job that S describes. Each root stuck
// collective is placed in S's plan (iteration and step), and compared with what S predicts:
// `check`'s first hit of a livelock pool and the simulator's hang.
struct ScenarioCrossCheck {
  std::string scenario_name;
  struct Placed {
    std::string group;       // as recorded
    std::string plan_group;  // S's process group it was matched to
    int64_t seq = 0;
    bool found = false;  // S's plan issues that sequence number within the job
    bool startup = false;
    uint64_t iteration = 0;
    std::string step;
  };
  std::vector<Placed> placed;
  bool check_hit = false;  // check predicts a livelock hit within the job
  uint32_t hit_rank = 0, hit_worker = 0, hit_slot = 0;
  uint64_t hit_iteration = 0;
  std::string pool;  // the pool, in user terms
  int64_t hit_index = 0;
  std::optional<TrapPool> hit_pool;  // the pool, in fields
  std::string sim_outcome, sim_cause;
  std::vector<uint32_t> sim_stuck_ranks;
  std::string sim_group;
  uint64_t sim_seq = 0, sim_iteration = 0;
  bool consistent = false;  // the recordings show the predicted livelock
  std::string verdict;
  // The collective the other ranks wait in when the predicted rank never starts its iteration: the first of that
  // iteration on default_pg (what a log without SeqNum is matched against).
  uint64_t predicted_seq = 0;
  std::string predicted_op, predicted_frame;
  // Training logs without SeqNum: the hang's iteration bound and whether op and frame match the plan's step.
  std::optional<IterationBound> log_bound;
  std::optional<bool> log_op_matches, log_frame_matches;  // unset: the log does not print it
  bool from_log = false;                                  // the recordings are a training log
  std::string log_frame;                                  // the waiting ranks' frame as logged
  std::vector<std::string> notes;                         // e.g. the log's seed differs from the scenario's
  // petrsim traces: where the given scenario's plan first differs from the plan the trace recorded ("" when equal).
  // The sequence numbers are then placed in the recorded plan, the one that ran.
  std::string plan_difference;
  // What makes the job terminate, each proven by re-running `check` on the scenario with it (check/fixes.h); empty
  // when the scenario's check finds nothing to fix.
  std::vector<Fix> fixes;
  // The predicted hang against the recordings, item by item: the missing ranks, the world size, the iteration, the
  // op, the plan step, the frame. "consistent" needs every item to match or be open (not in the recordings); the
  // verdict names what differs, and what is open.
  struct Comparison {
    std::string what;       // "missing ranks", "world size", "iteration", "op", "step", "frame"
    std::string predicted;  // the scenario's
    std::string recorded;   // the recordings', or why they do not say
    std::string result;     // "match", "differs" or "open"
  };
  std::vector<Comparison> comparisons;
  std::string predicted_step;  // the plan step of predicted_seq
  // The release the cross-check ran the scenario with, and where it came from (the artifact's, the scenario's, or
  // assumed): lines printed before the comparison, e.g. "release: the log says PyTorch 1.13.1+cu117 (train.log:7),
  // the scenario sets none (1.9 assumed): PyTorch 1.13 used".
  std::vector<std::string> artifact_lines;
};

// Before the cross-check: the PyTorch release the recordings name (a log's environment block `PyTorch: X`, a probe
// trace's header, a dump's version fields, or the one release a log's watchdog-line format fits) against the
// scenario's comm.torch_version. Where they differ and `release_given` is false (no --torch-version or --set of it),
// `scenario` takes the recordings' release. Returns the line that says which release is used and why.
std::vector<std::string> ReconcileRelease(const Diagnosis& diagnosis, Scenario& scenario, bool release_given);

// Throws ScenarioError when S cannot be used (its dataset or sampler fails).
ScenarioCrossCheck CrossCheck(const Diagnosis& diagnosis, const Scenario& scenario, const std::string& scenario_name);
std::string FormatCrossCheck(const ScenarioCrossCheck& cross);

// Without --scenario: for a livelock found in petrsim traces, the fixes proven on the scenario the traces recorded
// (empty when the diagnosis names no livelock or the traces carry no scenario).
std::vector<Fix> RecordedScenarioFixes(const Diagnosis& diagnosis);
// The fixes' text (FixLines) after a diagnosis, `preface` (if any) on the line before; "" when none.
std::string FormatFixes(const std::vector<Fix>& fixes, const std::string& preface);
nlohmann::json CrossCheckJson(const ScenarioCrossCheck& cross);

std::string FormatDiagnosis(const Diagnosis& diagnosis);
// {"format", "world_size", "groups": [{pg_id, desc, op, seq, sizes, dtype, missing_ranks,
// waiting_ranks, root, iteration?, step?}], "desyncs", "cycles", "ranks_without_file",
// "partial", "cause": string or null}. "groups" lists the root stuck collectives;
// "consequences" the others.
nlohmann::json DiagnosisJson(const Diagnosis& diagnosis);

// `diagnose --html`: a self-contained XHTML page (diagnose_html.cc): per root stuck collective
// (at most 4) a per-rank SVG timeline around it drawn from `recordings` (null for training logs:
// then only the diagnosis's own times), the table of stuck collectives, and `report` (the text
// the command prints) verbatim.
std::string DiagnosisHtml(const Diagnosis& diagnosis, const Recordings* recordings, const std::string& report);

}  // namespace petrsim
