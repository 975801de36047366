// Assertions for programmer errors (broken invariants). They stay on in release builds: a
// violated invariant must stop the run with a message, never produce a quiet wrong answer.
// Operating errors (bad scenario files, unreadable traces) use petrsim::ScenarioError instead.
#pragma once

#include <cstdio>
#include <cstdlib>

#define PETRSIM_ASSERT(condition)                                                                                \
  do {                                                                                                           \
    if (!(condition)) [[unlikely]] {                                                                             \
      std::fprintf(stderr, "petrsim: internal assertion failed at %s:%d: %s\n", __FILE__, __LINE__, #condition); \
      std::abort();                                                                                              \
    }                                                                                                            \
  } while (false)
