# Summary of an interleaved benchmark: input lines "round untraced traced"
# (lines that are not numbers are skipped); prints the two medians, their ratio and the
# difference. Set `unit` (ns, ms) and `what` with -v.
function median(a, n,   i, j, t) {
  for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (a[j] < a[i]) { t = a[i]; a[i] = a[j]; a[j] = t }
  return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
}
$2 ~ /^[0-9.]+$/ { b[++n] = $2; t[n] = $3 }  # every round (header lines skipped)
END {
  mb = median(b, n); mt = median(t, n)
  printf "median %s: untraced %.3f %s, traced %.3f %s\n", what, mb, unit, mt, unit
  printf "ratio traced/untraced %.4f, added %.3f %s\n", mt / mb, mt - mb, unit
}
