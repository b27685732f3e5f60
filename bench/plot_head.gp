# gnuplot script: LM-head time vs rows from head_bench --csv
# (docs/performance.md, "Head kernels (head_bench)"); with paths= (head_bench
# --paths-csv) also oneDNN's own time at every N, i.e. the head before vocabd's
# kernels.
#   gnuplot -e "csv='/tmp/head.csv'; paths='/tmp/paths.csv'; out='/tmp/head.png'" \
#       bench/plot_head.gp
set datafile separator ","
set terminal pngcairo size 900,540 noenhanced
set output out
set title "LM head, Llama-3 shape (V=128256, d=4096), 2 cores"
set xlabel "rows N"
set ylabel "time per GEMM (ms)"
set logscale xy
set key top left
set grid
if (exists("paths")) {
  plot csv using 1:2 skip 1 with linespoints lw 2 title "vocabd F32", \
       csv using 1:3 skip 1 with linespoints lw 2 title "vocabd BF16", \
       csv using 1:4 skip 1 with linespoints lw 2 title "OpenBLAS sgemm (F32)", \
       paths using 1:3 skip 1 with linespoints dt 3 lw 2 title "oneDNN 2.6 only, F32", \
       paths using 1:5 skip 1 with linespoints dt 3 lw 2 title "oneDNN 2.6 only, BF16", \
       csv using 1:5 skip 1 with lines dt 2 lw 2 title "bandwidth floor F32", \
       csv using 1:6 skip 1 with lines dt 2 lw 2 title "bandwidth floor BF16"
} else {
  plot csv using 1:2 skip 1 with linespoints lw 2 title "vocabd F32", \
       csv using 1:3 skip 1 with linespoints lw 2 title "vocabd BF16", \
       csv using 1:4 skip 1 with linespoints lw 2 title "OpenBLAS sgemm (F32)", \
       csv using 1:5 skip 1 with lines dt 2 lw 2 title "bandwidth floor F32", \
       csv using 1:6 skip 1 with lines dt 2 lw 2 title "bandwidth floor BF16"
}
