#!/usr/bin/env bash
# `seen dedup` against sort -u, awk, huniq and runiq on one generated file: the comparison that
# README.md and docs/benchmarks.md quote.
#
# Usage (from anywhere in the repository):
#
#   bash scripts/bench-cli.sh                        # 25,000,000 lines, 3 runs of every command
#   LINES=200000 RUNS=1 bash scripts/bench-cli.sh    # a quick check
#   TOOLS="seen huniq" bash scripts/bench-cli.sh     # a subset
#
# Environment:
#   LINES  lines to generate (default 25000000: 308 MB, 20,000,000 distinct; Perl writes it
#          in about 20 s, once)
#   RUNS   timed runs of each command (default 3); the table gives the median, min and max
#   TOOLS  the commands to run, by tool (sort awk huniq runiq seen) or by row
#          (sort awk huniq runiq runiq-compact seen-exact seen-default seen-bloom-t1
#          seen-bloom-t2); default all
#
# What it does:
#   1. Generates LINES lines into target/bench-cli/lines-LINES.txt (reused while its size and
#      SHA-256 match the .meta file beside it): line i repeats the key of a uniformly random
#      earlier line with probability 0.2, else is a new key `key-N`. The generator is Perl, whose
#      rand() is its own drand48 on every platform since 5.20, so the file is the same
#      everywhere; it also records the exact distinct count and the SHA-256 of the exact
#      first-occurrence output, against which every command's output is checked.
#   2. Installs huniq and runiq (pinned versions) with `cargo install --locked` into
#      target/bench-cli/tools when not there yet, and builds `seen` with
#      `cargo build --release -p seen-cli`.
#   3. Runs every command once to check its output (line count and checksum against the exact
#      output), then RUNS times, round-robin, reading the file on standard input and writing to
#      /dev/null, under GNU time (/usr/bin/time) for the peak RSS. Wall time is bash's
#      EPOCHREALTIME around the command. Everything runs with LC_ALL=C.
#   4. Prints a markdown table and writes it to target/bench-cli/results.md.
#
# Needs: bash 5, perl (with Digest::SHA, a core module), GNU time, cargo, coreutils. Linux.
set -euo pipefail

LINES=${LINES:-25000000}
RUNS=${RUNS:-3}
TOOLS=${TOOLS:-sort awk huniq runiq seen}

HUNIQ_VERSION=2.7.0
RUNIQ_VERSION=2.1.0
FPR=1e-4

# SHA-256 of the generated file for sizes measured before: another Perl giving other bytes
# makes the figures incomparable, so the script warns.
declare -A KNOWN_SHA256=(
    [200000]=5df5c98120aa882949a154167d98dacc0f242dfa6fd1261a0a9e8651c481e1e5
    [25000000]=8cde3d036aef647ea5d49982228b5969acd9c30666898a049f31085aa2ffd812
)

export LC_ALL=C

die() {
    echo "bench-cli: $*" >&2
    exit 1
}
say() { echo "bench-cli: $*" >&2; }

[[ $LINES =~ ^[1-9][0-9]*$ ]] || die "LINES must be a positive integer, not '$LINES'"
[[ $RUNS =~ ^[1-9][0-9]*$ ]] || die "RUNS must be a positive integer, not '$RUNS'"
((BASH_VERSINFO[0] >= 5)) || die "needs bash 5 (for EPOCHREALTIME), this is $BASH_VERSION"
/usr/bin/time --version 2>&1 | grep -q 'GNU' || die "needs GNU time at /usr/bin/time (apt-get install time)"
command -v perl > /dev/null || die "needs perl"
perl -MDigest::SHA -e 1 2> /dev/null || die "needs Perl's Digest::SHA"

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
TARGET=${CARGO_TARGET_DIR:-$ROOT/target}
WORK=$TARGET/bench-cli
TOOLS_ROOT=$WORK/tools
mkdir -p "$WORK"

ALL_ROWS=(sort awk huniq runiq runiq-compact seen-exact seen-default seen-bloom-t1 seen-bloom-t2)
for t in $TOOLS; do
    case " sort awk huniq runiq seen ${ALL_ROWS[*]} " in
        *" $t "*) ;;
        *) die "unknown TOOLS entry '$t' (tools: sort awk huniq runiq seen; rows: ${ALL_ROWS[*]})" ;;
    esac
done
# Whether row $1 (of tool $2) is selected.
selected() {
    case " $TOOLS " in
        *" $1 "* | *" $2 "*) return 0 ;;
        *) return 1 ;;
    esac
}

# --- 1. The input ---------------------------------------------------------------------------

DATA=$WORK/lines-$LINES.txt
META=$WORK/lines-$LINES.meta
GENERATOR=perl-drand48-v1

meta() { sed -n "s/^$1=//p" "$META"; }

data_is_good() {
    [[ -f $DATA && -f $META ]] || return 1
    [[ $(meta generator) == "$GENERATOR" && $(meta lines) == "$LINES" ]] || return 1
    [[ $(stat -c %s "$DATA") == "$(meta bytes)" ]] || return 1
    [[ $(sha256sum < "$DATA" | cut -d' ' -f1) == "$(meta sha256)" ]]
}

generate() {
    rm -f "$META"
    local start stats
    start=$EPOCHREALTIME
    # Prints "distinct first_sha256": the number of new keys and the SHA-256 of the new lines in
    # order, which is what an exact, order-keeping dedup must print.
    stats=$(
        perl - "$LINES" "$DATA.tmp" << 'PERL'
use strict;
use warnings;
use Digest::SHA;
my ($n, $path) = @ARGV;
open(my $out, '>', $path) or die "$path: $!\n";
srand(1);
my $first = Digest::SHA->new(256);
# $of: the key of every line so far, 32 bits each, so that a repeat picks a uniformly random
# earlier line (a popular key is repeated more often), not a random earlier key.
my ($of, $next, $buf, $new) = ('', 0, '', '');
for my $i (0 .. $n - 1) {
    my $k;
    if ($i > 0 && rand() < 0.2) {
        $k = vec($of, int(rand($i)), 32);
    } else {
        $k = $next++;
        $new .= "key-$k\n";
    }
    vec($of, $i, 32) = $k;
    $buf .= "key-$k\n";
    if (length($buf) >= 1 << 16) {
        print {$out} $buf or die "$path: $!\n";
        $first->add($new);
        ($buf, $new) = ('', '');
    }
}
print {$out} $buf or die "$path: $!\n";
$first->add($new);
close($out) or die "$path: $!\n";
print "$next ", $first->hexdigest, "\n";
PERL
    )
    mv "$DATA.tmp" "$DATA"
    local distinct first_sha
    read -r distinct first_sha <<< "$stats"
    {
        echo "generator=$GENERATOR"
        echo "lines=$LINES"
        echo "bytes=$(stat -c %s "$DATA")"
        echo "sha256=$(sha256sum < "$DATA" | cut -d' ' -f1)"
        echo "distinct=$distinct"
        echo "first_sha256=$first_sha"
    } > "$META.tmp"
    mv "$META.tmp" "$META"
    GENERATION_S=$(awk -v a="$start" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.1f", b - a }')
    say "generated $DATA in $GENERATION_S s"
}

GENERATION_S=
if data_is_good; then
    say "reusing $DATA"
else
    say "generating $LINES lines into $DATA"
    generate
fi
BYTES=$(meta bytes)
DATA_SHA=$(meta sha256)
DISTINCT=$(meta distinct)
FIRST_SHA=$(meta first_sha256)
if [[ -n ${KNOWN_SHA256[$LINES]:-} && ${KNOWN_SHA256[$LINES]} != "$DATA_SHA" ]]; then
    say "WARNING: $DATA has SHA-256 $DATA_SHA, not ${KNOWN_SHA256[$LINES]} as in earlier runs"
    say "WARNING: (another Perl's rand()?): figures are not comparable with the published ones"
fi

# The filter's capacity: the distinct count rounded up to two significant digits.
CAPACITY=$(awk -v d="$DISTINCT" 'BEGIN {
    u = 1; while (u * 100 <= d) u *= 10
    printf "%d", int((d + u - 1) / u) * u
}')

# --- 2. The tools ---------------------------------------------------------------------------

install_tool() { # name version
    local bin=$TOOLS_ROOT/bin/$1
    if [[ -x $bin && $("$bin" --version 2> /dev/null) == "$1 $2" ]]; then
        return
    fi
    say "installing $1 $2 into $TOOLS_ROOT"
    cargo install --quiet --locked --root "$TOOLS_ROOT" "$1@$2"
}
if selected huniq huniq; then install_tool huniq "$HUNIQ_VERSION"; fi
if selected runiq runiq || selected runiq-compact runiq; then install_tool runiq "$RUNIQ_VERSION"; fi
HUNIQ=$TOOLS_ROOT/bin/huniq
RUNIQ=$TOOLS_ROOT/bin/runiq

SEEN=$TARGET/release/seen
case " $TOOLS " in
    *" seen"*)
        say "building seen"
        cargo build --quiet --release -p seen-cli
        ;;
esac
THREADS_NOTE=
HAVE_THREADS=no
if [[ -x $SEEN ]] && "$SEEN" dedup --help | grep -q -- --threads; then
    HAVE_THREADS=yes
fi

# --- 3. The commands ------------------------------------------------------------------------

# One row per command: id, tool, the command as shown, then the command as run, one word per
# argument (kept in ROW_ARGV joined by the unit separator, so that paths may hold spaces).
US=$'\x1f'
ROW_ID=() ROW_TOOL=() ROW_SHOWN=() ROW_ARGV=()
row() {
    selected "$1" "$2" || return 0
    local argv
    argv=$(IFS=$US && printf %s "${*:4}")
    ROW_ID+=("$1") ROW_TOOL+=("$2") ROW_SHOWN+=("$3") ROW_ARGV+=("$argv")
}
row sort sort 'sort -u' sort -u
# shellcheck disable=SC2016 # the awk program, not a shell expansion
row awk awk "awk '!seen[\$0]++'" awk '!seen[$0]++'
row huniq huniq 'huniq' "$HUNIQ"
row runiq runiq 'runiq' "$RUNIQ"
row runiq-compact runiq 'runiq -f compact' "$RUNIQ" -f compact
row seen-exact seen 'seen dedup --exact' "$SEEN" dedup --exact
# No sizing flag: what a user who replaces `sort -u` with `seen dedup` gets. Its "missing vs
# exact" cell is the new lines the default structure dropped on this input.
row seen-default seen 'seen dedup' "$SEEN" dedup
# A fixed-size filter sized for the input's distinct keys (`--fixed`; a seen before it was the
# default, and takes no --fixed).
if "$SEEN" dedup --help | grep -q -- '--fixed'; then
    FIXED=(--fixed)
else
    FIXED=()
fi
BLOOM="${FIXED[*]} --capacity $CAPACITY --fpr $FPR"
BLOOM=${BLOOM# }
if [[ $HAVE_THREADS == yes ]]; then
    row seen-bloom-t1 seen "seen dedup $BLOOM --threads 1" "$SEEN" dedup "${FIXED[@]}" --capacity "$CAPACITY" --fpr "$FPR" --threads 1
    row seen-bloom-t2 seen "seen dedup $BLOOM --threads 2" "$SEEN" dedup "${FIXED[@]}" --capacity "$CAPACITY" --fpr "$FPR" --threads 2
else
    if selected seen-bloom-t1 seen || selected seen-bloom-t2 seen; then
        THREADS_NOTE="This \`seen\` does not take \`--threads\` yet: its Bloom row runs without it (one thread), and there is no 2-thread row."
        say "$THREADS_NOTE"
    fi
    row seen-bloom-t1 seen "seen dedup $BLOOM" "$SEEN" dedup "${FIXED[@]}" --capacity "$CAPACITY" --fpr "$FPR"
fi
((${#ROW_ID[@]} > 0)) || die "TOOLS='$TOOLS' selects no command"

# Warm the page cache so that the first command does not pay for the disk.
cat "$DATA" > /dev/null

# The check: every command once, its output's line count and SHA-256.
OUT=$WORK/out.tmp
declare -A COUNT=() SAME=()
for i in "${!ROW_ID[@]}"; do
    IFS=$US read -ra argv <<< "${ROW_ARGV[$i]}"
    say "checking ${ROW_SHOWN[$i]}"
    "${argv[@]}" < "$DATA" > "$OUT" || die "${ROW_SHOWN[$i]} failed"
    COUNT[$i]=$(wc -l < "$OUT")
    if [[ $(sha256sum < "$OUT" | cut -d' ' -f1) == "$FIRST_SHA" ]]; then
        SAME[$i]=yes
    elif [[ ${ROW_ID[$i]} == sort ]]; then
        SAME[$i]="sorted"
    else
        SAME[$i]=no
    fi
done
rm -f "$OUT"

# The timed runs, round-robin so that a change in the machine's load spreads over every command.
declare -A WALLS=() RSS=()
for ((r = 1; r <= RUNS; r++)); do
    for i in "${!ROW_ID[@]}"; do
        IFS=$US read -ra argv <<< "${ROW_ARGV[$i]}"
        say "run $r/$RUNS: ${ROW_SHOWN[$i]}"
        start=$EPOCHREALTIME
        /usr/bin/time -f '%M' -o "$WORK/time.tmp" "${argv[@]}" < "$DATA" > /dev/null ||
            die "${ROW_SHOWN[$i]} failed"
        end=$EPOCHREALTIME
        WALLS[$i]+="$(awk -v a="$start" -v b="$end" 'BEGIN { printf "%.4f", b - a }') "
        RSS[$i]+="$(tail -n 1 "$WORK/time.tmp") "
    done
done
rm -f "$WORK/time.tmp"

# --- 4. The table ---------------------------------------------------------------------------

# "median min max" of the numbers in $1.
stats() {
    tr ' ' '\n' <<< "$1" | grep . | sort -g | awk '
        { v[NR] = $1 }
        END { m = NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2; print m, v[1], v[NR] }'
}
largest() { tr ' ' '\n' <<< "$1" | grep . | sort -g | tail -n 1; }

HUNIQ_ROW=
for i in "${!ROW_ID[@]}"; do
    if [[ ${ROW_ID[$i]} == huniq ]]; then HUNIQ_ROW=$i; fi
done
if [[ -n $HUNIQ_ROW ]]; then
    read -r HUNIQ_WALL _ _ <<< "$(stats "${WALLS[$HUNIQ_ROW]}")"
    HUNIQ_RSS=$(largest "${RSS[$HUNIQ_ROW]}")
fi

awk_version() { awk -W version 2> /dev/null | head -n 1 || awk --version | head -n 1; }
version_of() { # tool
    case $1 in
        sort) sort --version | head -n 1 ;;
        awk) awk_version ;;
        huniq) "$HUNIQ" --version ;;
        runiq) "$RUNIQ" --version ;;
        seen) echo "$("$SEEN" --version) ($(git rev-parse --short HEAD 2> /dev/null || echo '?')$(git diff --quiet HEAD 2> /dev/null || echo ', modified'))" ;;
    esac
}

{
    echo "## \`seen dedup\` against sort -u, awk, huniq and runiq"
    echo
    echo "- Date: $(date -u '+%Y-%m-%d %H:%M UTC'); command: \`LINES=$LINES RUNS=$RUNS TOOLS=\"$TOOLS\" bash scripts/bench-cli.sh\`"
    echo "- Machine: $(nproc) CPUs ($(lscpu | sed -n 's/^Model name: *//p' | head -n 1)), $(awk '/^MemTotal/ { printf "%.1f GiB", $2 / 1048576 }' /proc/meminfo) memory, Linux $(uname -r); load average before the runs: $(cut -d' ' -f1-3 /proc/loadavg)"
    echo "- Input: $LINES lines, $BYTES bytes, $DISTINCT distinct ($(awk -v l="$LINES" -v d="$DISTINCT" 'BEGIN { printf "%.1f", 100 * (l - d) / l }')% duplicates), SHA-256 \`${DATA_SHA:0:16}…\`; each line repeats a uniformly random earlier line with probability 0.2 (\`target/bench-cli/lines-$LINES.txt\`)"
    echo "- Each command reads the file on standard input and writes to /dev/null, with \`LC_ALL=C\`; $RUNS timed run(s) each, round-robin, after one checked run. Wall: bash's \`EPOCHREALTIME\` around \`/usr/bin/time\`, median (min–max). Peak RSS: GNU time's \`%M\`, the largest of the runs. MB = 10^6 bytes."
    echo "- Bloom filters: \`seen\` sized for $CAPACITY keys (the distinct count rounded up) at $FPR; \`runiq -f compact\` is a growable Bloom filter (1e6 first layer, 1e-8). \`huniq\` and \`runiq\` keep a 64-bit hash per key, \`seen --exact\` a 96-bit fingerprint per key, \`awk\` the key itself; \`seen dedup\` without sizing flags is the default structure, sized by none of the input's figures."
    echo "- Versions: $(for t in sort awk huniq runiq seen; do
        for i in "${!ROW_ID[@]}"; do
            if [[ ${ROW_TOOL[$i]} == "$t" ]]; then
                printf '%s; ' "$(version_of "$t")"
                break
            fi
        done
    done | sed 's/; $//')"
    echo "- \`sort -u\` sorts with min(nproc, 8) threads. \`huniq\` and \`runiq\` write each output line with a write(2) of its own (Rust's line-buffered standard output): cheap into /dev/null, dearer into a pipe. \"same as first-occurrence output\": the output's SHA-256 equals that of the exact output in input order."
    if [[ -n $THREADS_NOTE ]]; then echo "- $THREADS_NOTE"; fi
    echo
    echo "| tool | command | wall s, median (min–max) | M lines/s | peak RSS MB | output lines | missing vs exact | same as first-occurrence output | throughput vs huniq | memory vs huniq |"
    echo "| --- | --- | --- | ---: | ---: | ---: | ---: | --- | ---: | ---: |"
    for i in "${!ROW_ID[@]}"; do
        read -r med lo hi <<< "$(stats "${WALLS[$i]}")"
        rss=$(largest "${RSS[$i]}")
        missing=$((DISTINCT - COUNT[$i]))
        awk -v tool="${ROW_TOOL[$i]}" -v shown="${ROW_SHOWN[$i]}" -v med="$med" -v lo="$lo" -v hi="$hi" \
            -v lines="$LINES" -v rss="$rss" -v count="${COUNT[$i]}" -v missing="$missing" \
            -v distinct="$DISTINCT" -v same="${SAME[$i]}" -v hw="${HUNIQ_WALL:-}" -v hr="${HUNIQ_RSS:-}" '
            BEGIN {
                miss = missing
                if (missing > 0) miss = sprintf("%d (%.1e of the distinct)", missing, missing / distinct)
                tput = hw == "" ? "–" : sprintf("%.2fx", hw / med)
                mem = hr == "" ? "–" : sprintf("%.2fx", rss / hr)
                printf "| %s | `%s` | %.2f (%.2f–%.2f) | %.2f | %.1f | %d | %s | %s | %s | %s |\n",
                    tool, shown, med, lo, hi, lines / med / 1e6, rss * 1024 / 1e6, count, miss,
                    same, tput, mem
            }'
    done
    echo
    echo "Throughput vs huniq: huniq's median wall time over the command's (above 1: faster). Memory vs huniq: the command's peak RSS over huniq's (below 1: smaller)."
} | tee "$WORK/results.md"

if [[ -n $GENERATION_S ]]; then
    say "generating the input took $GENERATION_S s"
fi
say "table written to $WORK/results.md"
