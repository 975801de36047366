// What a rank's stderr gets, release by release, when ProcessGroupNCCL's watchdog finds a collective that ran past its
// timeout (docs/research/nccl_watchdog_lines.md, whose evidence labels the comments here repeat).
//
// The lines are those of a job launched the way torchrun launches it: NCCL_ASYNC_ERROR_HANDLING makes the watchdog tear
// the process down (without it, 1.9 to 2.1 hang instead and print nothing), init_process_group has run (from 2.2 every
// line carries `[rank<global>]:`), and the log level is the default (the INFO lines of 1.9 to 2.0 stay hidden).
// Pure functions of their arguments; safe to call from any thread.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "model/torch_version.h"

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

}  // namespace petrsim
