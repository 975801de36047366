# docs/user_guide.md quotes a golden report (GOLDEN) verbatim: it must be the current one.
file(READ ${GUIDE} guide)
file(READ ${GOLDEN} golden)
string(FIND "${guide}" "${golden}" at)
if(at EQUAL -1)
  message(FATAL_ERROR "${GUIDE} does not quote ${GOLDEN} as it is now; paste the new report")
endif()
