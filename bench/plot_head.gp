# gnuplot script: LM-head time vs rows from head_bench --csv (README
# "Scoring performance").
#   gnuplot -e "csv='/tmp/head.csv'; out='docs/scoring_head.png'" bench/plot_head.gp
set datafile separator ","
set terminal pngcairo size 800,480 noenhanced
set output out
set title "LM head, Llama-3 shape (V=128256, d=4096), 2 cores"
set xlabel "rows N"
set ylabel "time per GEMM (ms)"
set logscale xy
set key top left
set grid
plot csv using 1:2 skip 1 with linespoints lw 2 title "vocabd F32", \
     csv using 1:3 skip 1 with linespoints lw 2 title "vocabd BF16", \
     csv using 1:4 skip 1 with linespoints lw 2 title "OpenBLAS sgemm (F32)", \
     csv using 1:5 skip 1 with lines dt 2 lw 2 title "bandwidth floor F32", \
     csv using 1:6 skip 1 with lines dt 2 lw 2 title "bandwidth floor BF16"
