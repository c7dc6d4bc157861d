# The stand-in kernel's time in microseconds: fastest at X = 3, Y = 2.
cost() {
  awk -v x="$1" -v y="$2" -v n="$3" 'BEGIN { d = x - 3; printf "%.3f", (10 + d * d + (y == 2 ? 0 : 1)) * n / 1024 }'
}
