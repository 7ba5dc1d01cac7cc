# Prints the layering report written at configure time; fails on a FAIL line.
file(READ ${REPORT} report)
message("${report}")
if(report MATCHES "FAIL")
  message(FATAL_ERROR "layering: a library links one it must not (see above)")
endif()
