"""Bitwise and max relative difference of two float32 dump files."""
import array, sys
a, b = array.array("f"), array.array("f")
a.frombytes(open(sys.argv[1], "rb").read())
b.frombytes(open(sys.argv[2], "rb").read())
assert len(a) == len(b), (len(a), len(b))
diff = [i for i in range(len(a)) if a[i] != b[i] and not (a[i] != a[i] and b[i] != b[i])]
worst = max((abs(a[i] - b[i]) / max(abs(b[i]), 1e-30) for i in diff), default=0.0)
print("%d floats, %d differ, max relative difference %.3g" % (len(a), len(diff), worst))
