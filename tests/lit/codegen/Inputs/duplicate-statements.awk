# Fails (exit 1, printing the statement) when a generated elementwise body
# -- a CUDA `auto body = [&](...) { ... };` lambda or a CPU kernel's loop
# body -- declares two scalars with the same right-hand side.
/auto body = |for \(int64_t / { inbody = 1; delete seen; next }
inbody && (/^  };/ || /^ *}$/) { inbody = 0; next }
inbody && /const [a-z0-9_]+ s[0-9]+ = / {
  rhs = $0
  sub(/.*= /, "", rhs)
  if (rhs in seen) { print "duplicate in one body: " rhs; bad = 1 }
  seen[rhs] = 1
}
END { exit bad }
