set terminal pngcairo size 1400,1000 font 'sans,11'
set output 'bench/results/throughput.png'
set multiplot layout 2,2 title 'unico-bench: throughput vs threads (durable commits)'
set logscale x 2
set logscale y 10
set grid
set xlabel 'threads'
set ylabel 'ops/s'
set key top left
set format y '%.0s%c'
set title 'signup'
plot 'bench/results/plotdata/unico-signup.dat' using 1:2 with linespoints lw 2 lc rgb '#d62728' pt 7 title 'unico', 'bench/results/plotdata/unico-log-signup.dat' using 1:2 with linespoints lw 2 lc rgb '#006400' pt 11 title 'unico-log', 'bench/results/plotdata/unico-log-leader-signup.dat' using 1:2 with linespoints lw 2 lc rgb '#2ca02c' pt 15 title 'unico-log-leader', 'bench/results/plotdata/unico-async-signup.dat' using 1:2 with linespoints lw 2 lc rgb '#9467bd' pt 13 title 'unico-async', 'bench/results/plotdata/postgres-signup.dat' using 1:2 with linespoints lw 2 lc rgb '#1f77b4' pt 5 title 'postgres', 'bench/results/plotdata/sqlite-signup.dat' using 1:2 with linespoints lw 2 lc rgb '#ff7f0e' pt 9 title 'sqlite'
set title 'email-change'
plot 'bench/results/plotdata/unico-email-change.dat' using 1:2 with linespoints lw 2 lc rgb '#d62728' pt 7 title 'unico', 'bench/results/plotdata/unico-log-email-change.dat' using 1:2 with linespoints lw 2 lc rgb '#006400' pt 11 title 'unico-log', 'bench/results/plotdata/unico-log-leader-email-change.dat' using 1:2 with linespoints lw 2 lc rgb '#2ca02c' pt 15 title 'unico-log-leader', 'bench/results/plotdata/unico-async-email-change.dat' using 1:2 with linespoints lw 2 lc rgb '#9467bd' pt 13 title 'unico-async', 'bench/results/plotdata/postgres-email-change.dat' using 1:2 with linespoints lw 2 lc rgb '#1f77b4' pt 5 title 'postgres', 'bench/results/plotdata/sqlite-email-change.dat' using 1:2 with linespoints lw 2 lc rgb '#ff7f0e' pt 9 title 'sqlite'
set title 'mixed'
plot 'bench/results/plotdata/unico-mixed.dat' using 1:2 with linespoints lw 2 lc rgb '#d62728' pt 7 title 'unico', 'bench/results/plotdata/unico-log-mixed.dat' using 1:2 with linespoints lw 2 lc rgb '#006400' pt 11 title 'unico-log', 'bench/results/plotdata/unico-log-leader-mixed.dat' using 1:2 with linespoints lw 2 lc rgb '#2ca02c' pt 15 title 'unico-log-leader', 'bench/results/plotdata/unico-async-mixed.dat' using 1:2 with linespoints lw 2 lc rgb '#9467bd' pt 13 title 'unico-async', 'bench/results/plotdata/postgres-mixed.dat' using 1:2 with linespoints lw 2 lc rgb '#1f77b4' pt 5 title 'postgres', 'bench/results/plotdata/sqlite-mixed.dat' using 1:2 with linespoints lw 2 lc rgb '#ff7f0e' pt 9 title 'sqlite'
set title 'hot'
plot 'bench/results/plotdata/unico-hot.dat' using 1:2 with linespoints lw 2 lc rgb '#d62728' pt 7 title 'unico', 'bench/results/plotdata/unico-log-hot.dat' using 1:2 with linespoints lw 2 lc rgb '#006400' pt 11 title 'unico-log', 'bench/results/plotdata/unico-log-leader-hot.dat' using 1:2 with linespoints lw 2 lc rgb '#2ca02c' pt 15 title 'unico-log-leader', 'bench/results/plotdata/postgres-hot.dat' using 1:2 with linespoints lw 2 lc rgb '#1f77b4' pt 5 title 'postgres', 'bench/results/plotdata/sqlite-hot.dat' using 1:2 with linespoints lw 2 lc rgb '#ff7f0e' pt 9 title 'sqlite'
unset multiplot
