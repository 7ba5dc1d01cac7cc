# cmake -DOUT=file -DPIECES="a|b|c" -P ConcatSources.cmake
# Writes the pieces' text one after another, byte for byte, into OUT (the
# CUDA prelude is kept as one piece per kernel family and pasted as one
# text). Pieces are separated by '|': a ';' list would be split into
# several arguments on the command line.
string(REPLACE "|" ";" piece_list "${PIECES}")
set(text "")
foreach(piece IN LISTS piece_list)
  file(READ "${piece}" piece_text)
  string(APPEND text "${piece_text}")
endforeach()
file(WRITE "${OUT}.tmp" "${text}")
file(COPY_FILE "${OUT}.tmp" "${OUT}" ONLY_IF_DIFFERENT)
