// What a rank's stderr gets, release by release, when ProcessGroupNCCL's watchdog finds a collective that ran past its
// timeout (docs/research/nccl_watchdog_lines.md, whose evidence labels the comments here repeat).
//
// The lines are those of a job launched the way torchrun launches it: NCCL_ASYNC_ERROR_HANDLING makes the watchdog tear
// the process down (without it, 1.9 to 2.1 hang instead and print nothing), init_process_group has run (from 2.2 every
// line carries `[rank<global>]:`), and the log level is the default (the INFO lines of 1.9 to 2.0 stay hidden).
// Pure functions of their arguments; safe to call from any thread.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "proto/scenario.pb.h"
#include "scenario/torch_version.h"

namespace petrsim {

// The time c10's logger prints from 2.4: `[E<month*100+day> HH:MM:SS.<9 digits>`, so 26 January reads `E126` (the
// month is not zero-padded), 6 December `E1206`. The clock and time zone are the rank's; petrsim supplies them.
struct LogTimestamp {
  int month = 1;  // 1..12
  int day = 1;    // 1..31
  int hour = 0;
  int minute = 0;
  int second = 0;
  uint32_t nanoseconds = 0;  // 0..999999999
};

// One collective the watchdog found past its timeout on one rank.
struct WatchdogTimeout {
  TorchVersion version;
  uint32_t group_rank = 0;    // the rank within the process group that timed out: `[Rank <r>]`, `[PG ... Rank <r>]`
  uint32_t global_rank = 0;   // the rank in the default (world) group: the `[rank<g>]:` line prefix, from 2.2
  std::string pg_name = "0";  // the group's name: `[PG <name> ...]` in 2.3 and 2.4, `PG GUID <name>` in 2.5
  uint64_t pg_local_id = 0;   // 2.5's `PG ID <id>`: the process's count of groups created before this one
  std::string pg_desc = "default_pg";  // from 2.4: `(<desc>)` after the name; empty: no description, none printed
  uint64_t seq = 0;                    // the collective's sequence number on its group: SeqNum= from 1.11
  std::string op = "ALLREDUCE";        // OpType= as WorkNCCL prints it: ALLREDUCE, BROADCAST, _ALLGATHER_BASE, ...
  uint64_t numel_in = 0;               // NumelIn= and NumelOut=, from 2.1
  uint64_t numel_out = 0;
  uint64_t timeout_ms = 1800000;   // the group's timeout: Timeout(ms)=
  uint64_t ran_for_ms = 0;         // how long the collective had run when the watchdog looked: `ran for <t>`
  uint64_t last_enqueued_seq = 0;  // from 2.3: the group's last issued and last completed sequence numbers
  uint64_t last_completed_seq = 0;
  LogTimestamp timestamp;  // from 2.4; one value for every line
};

struct WatchdogLines {
  // Everything the release prints for the timeout, in order, one entry a line, without the newline. Left out: the
  // C++ frame lines (`frame #0: ...`, with addresses) that follow each `Exception raised from ...` line from 2.2, the
  // blank line after a frame list, and in 2.2 and 2.3 the `Exception raised from` line of the error the watchdog
  // thread rethrows (shown from 2.4; no log of 2.2 or 2.3 shows its line number).
  std::vector<std::string> lines;
  // False where no source or versioned log gives the release's line numbers (1.10, 1.11, 1.12): the numbers printed
  // are the nearest evidence, and some fields are inferred too. A caller should say "line numbers unknown for this
  // release" beside them.
  bool line_numbers_known = false;
  // One phrase on what the lines rest on, e.g. "verified from source (v1.9.0)".
  std::string evidence;
};

// The lines for `timeout.version`, which must be a supported release (ParseTorchVersion's; asserted).
WatchdogLines NcclWatchdogLines(const WatchdogTimeout& timeout);

// ---------------------------------------------------------------------------------------------
// The one place both backends turn a timed-out collective into the lines the job prints (the simulator's
// JobSim::WatchdogLines and the real trainer's collective watchdog), so that they cannot drift.

// The elements WorkNCCL counts for a collective of the plan on a group of `world_size` ranks: NumelIn= is its numel
// (a barrier's one-element tensor), NumelOut= the same, except allgather (world_size x) and reduce_scatter (one chunk,
// rounded up).
struct WorkNumel {
  uint64_t in = 0;
  uint64_t out = 0;
};
WorkNumel NumelOfWork(const Collective& collective, uint32_t world_size);

// One collective past its timeout on one rank, in the terms both backends observe. Every process group of a petrsim job
// spans the world, so the rank within the group is the global rank.
struct CollectiveTimeout {
  Comm::Backend backend = Comm::nccl;  // whose lines: NCCL's watchdog, or Gloo's timed-out wait
  TorchVersion version;
  uint32_t rank = 0;
  uint32_t process_group_index = 0;  // the group's place in creation order, the world group 0 (ProcessGroupNames)
  std::string process_group;         // its plan name ("default_pg"): the description PyTorch prints from 2.4
  uint64_t seq = 0;                  // its c10d sequence number on the group
  Collective::Op op = Collective::allreduce;
  WorkNumel numel;
  uint64_t timeout_ms = 0;
  uint64_t ran_for_ms = 0;          // how long it had run when the watchdog (or the waiting call) gave up
  uint64_t last_enqueued_seq = 0;   // the rank's last issued sequence number on the group
  uint64_t last_completed_seq = 0;  // and its last completed one
  LogTimestamp timestamp;           // the rank's clock when it fired
};

// Everything the rank prints for `timeout`, one entry a line: NcclWatchdogLines with the fields filled from it for
// NCCL; for Gloo the one line of the RuntimeError its waiting call raises.
std::vector<std::string> CollectiveTimeoutLines(const CollectiveTimeout& timeout);

// What to say beside those lines, or "": for NCCL and a release whose ProcessGroupNCCL.cpp line numbers are not
// known, that they are not, and what they rest on.
std::string CollectiveTimeoutNote(Comm::Backend backend, TorchVersion version);

// The simulator's log clock: virtual time 0 read as 1 January, 00:00:00 (no leap years).
LogTimestamp LogTimestampOfVirtualTime(int64_t ns);

// A real rank's log clock: `now` in the process's time zone (TZ, as localtime_r reads it), as c10's logger
// prints it; the one function here that is not pure.
LogTimestamp LogTimestampOfLocalTime(std::chrono::system_clock::time_point now);

}  // namespace petrsim
