#!/usr/bin/env bash
# bench/fleet.sh — loaders sharing one container over one key-sorted (or
# shuffled) NDJSON file, by hand: the fleet.sh rows of bench/README.md.
# Starts `loader emulator` and Azurite (from
# node_modules: run scripts/test or npm ci once) on free loopback ports,
# runs LOADERS copies of the same import for SECONDS (SIGINT then), prints
# each loader's report and peak RSS, and stops both servers.
#
#   bench/fleet.sh [--blob] LOADER INPUT RU PARTITIONS SECONDS LOADERS SHARD_BYTES [import flags…]
#   bench/fleet.sh --sorted FILE RECORDS TENANTS     writes a key-sorted input (CSV if FILE is *.csv)
#   bench/fleet.sh --shuffled FILE RECORDS TENANTS   the same records, shuffled
#
# --blob uploads INPUT to Azurite (bench/putblob) and the loaders read the
# blob. SHARD_BYTES 0 runs plain imports, not sharing (LOADERS 1).
#
# e.g. bench/fleet.sh --sorted /tmp/sorted.ndjson 192000 64 &&
#      go build -o /tmp/loader . &&
#      bench/fleet.sh /tmp/loader /tmp/sorted.ndjson 16000 8 40 2 1048576
#      bench/fleet.sh --blob /tmp/loader /tmp/sorted.ndjson 16000 8 40 1 0
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"

if [[ "${1:-}" == --sorted || "${1:-}" == --shuffled ]]; then
	if [[ "$2" == *.csv && "$1" == --shuffled ]]; then
		echo "--shuffled writes NDJSON only" >&2
		exit 2
	fi
	# FILE.csv: the same records as CSV, every tenth pad quoted over two
	# lines with a doubled quote, so finding record starts follows quoting.
	awk -v n="$3" -v t="$4" -v csv="$([[ "$2" == *.csv ]] && echo 1)" 'BEGIN {
		srand(1)
		if (csv) print "id,tenant,v,pad"
		for (i = 0; i < n; i++) {
			pad = sprintf("%*s", 100 + int(rand() * 200), "")
			gsub(/ /, "x", pad)
			if (!csv)
				printf "{\"id\":\"r%d\",\"tenant\":\"t%03d\",\"v\":%d,\"pad\":\"%s\"}\n", i, int(i * t / n), i, pad
			else if (i % 10 == 0)
				printf "r%d,t%03d,%d,\"%s\n\"\"%s\"\n", i, int(i * t / n), i, substr(pad, 1, 50), substr(pad, 51)
			else
				printf "r%d,t%03d,%d,%s\n", i, int(i * t / n), i, pad
		}
	}' >"$2"
	if [[ "$1" == --shuffled ]]; then
		shuf --random-source=<(yes) -o "$2" "$2"
	fi
	exit 0
fi

blob=
if [[ "${1:-}" == --blob ]]; then
	blob=1
	shift
fi
if (($# < 7)); then
	sed -n '2,19p' "$0" >&2
	exit 2
fi
bin=$1 in=$2 ru=$3 parts=$4 secs=$5 n=$6 shard=$7
shift 7

free_port() { node -e 'const s=require("net").createServer().listen(0,"127.0.0.1",()=>{console.log(s.address().port);s.close()})'; }
work="$(mktemp -d "${TMPDIR:-/tmp}/loader-fleet.XXXXXX")"
pids=()
cleanup() {
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
	wait 2>/dev/null || true
	rm -rf "$work"
}
trap cleanup EXIT

cport="$(free_port)"
"$bin" emulator --addr "127.0.0.1:$cport" --ru "$ru" --partitions "$parts" >"$work/emulator.log" 2>&1 &
pids+=($!)
bport="$(free_port)"
"$root/node_modules/.bin/azurite-blob" --blobHost 127.0.0.1 --blobPort "$bport" --location "$work/azurite" \
	--disableTelemetry --skipApiVersionCheck --loose >"$work/azurite.log" 2>&1 &
pids+=($!)
sleep 2

key='C2y6yDjf5/R+ob0N8A7Cgv30VRDJIWEHLM+4QDU5DE2nQ9nDuVTqobD4b8mGGyPMbIZnqyMsEcaGQy67XIw/Jw=='
azkey='Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=='
leases="DefaultEndpointsProtocol=http;AccountName=devstoreaccount1;AccountKey=$azkey;BlobEndpoint=http://127.0.0.1:$bport/devstoreaccount1;"
if [[ -n "$blob" ]]; then
	(cd "$root" && go run ./bench/putblob "$leases" inputs "$(basename "$in")" "$in")
	in="http://127.0.0.1:$bport/devstoreaccount1/inputs/$(basename "$in")"
	set -- --source-connection-string "$leases" "$@"
fi
share=(--lease-connection-string "$leases" --shard-size "$shard")
if [[ "$shard" == 0 ]]; then
	share=()
fi
loaders=()
for i in $(seq 1 "$n"); do
	mkdir -p "$work/l$i"
	(cd "$work/l$i" && HOME="$work/l$i" /usr/bin/time -f "%M" -o "$work/l$i/rss" \
		timeout --foreground -s INT "$secs" "$bin" import "$in" --endpoint "http://127.0.0.1:$cport/" --key "$key" \
		--database d --container c --create-container --partition-key /tenant --ru "$ru" --quiet \
		--report "$work/l$i/report.json" "${share[@]}" "$@" \
		>"$work/l$i/out" 2>&1 || true) &
	loaders+=($!)
done
wait "${loaders[@]}"
for i in $(seq 1 "$n"); do
	node -e '
		const r = require(process.argv[1]);
		const rss = require("fs").readFileSync(process.argv[2], "utf8").trim().split("\n").pop();
		console.log(`loader ${process.argv[3]}: written ${r.records_written} in ${r.duration_seconds} s, ` +
			`${Math.round(r.ru_consumed)} RU, ${r.requests_sent} requests, ${r.throttled_responses} throttled, ` +
			`${(r.shards || []).length} shards, peak RSS ${Math.round(rss / 1024)} MB`);
	' "$work/l$i/report.json" "$work/l$i/rss" "$i" || tail -5 "$work/l$i/out"
done
