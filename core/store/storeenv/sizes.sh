#!/bin/sh
# Prints what each store backend adds to a stripped linux/amd64 binary that opens a store with
# storeenv and serves HTTP (as controllers do): the baseline leaves every backend out (memory
# only), each row adds one backend.
# Run from anywhere in the module: core/store/storeenv/sizes.sh
set -eu
cd "$(dirname "$0")/../../.."
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
all="bolt dynamodb postgres redis"

build() { # name tags
	GOOS=linux GOARCH=amd64 CGO_ENABLED=0 go build -trimpath -ldflags='-s -w' -tags "$2" \
		-o "$out/$1" ./core/store/storeenv/internal/sizecmd
	stat -c %s "$out/$1"
}
tags_without() { # backends to keep
	t=""
	for b in $all; do
		case " $* " in *" $b "*) ;; *) t="$t,svz_no$b" ;; esac
	done
	echo "${t#,}"
}

base=$(build none "$(tags_without)")
printf '%-22s %10s %10s\n' "backends" "bytes" "added"
printf '%-22s %10d %10s\n' "none (memory only)" "$base" "-"
for b in $all; do
	size=$(build "$b" "$(tags_without "$b")")
	printf '%-22s %10d %+10d\n' "$b" "$size" "$((size - base))"
done
size=$(build dynamodb-nochain "$(tags_without dynamodb),svz_noawschain")
printf '%-22s %10d %+10d\n' "dynamodb, svz_noawschain" "$size" "$((size - base))"
size=$(build all "")
printf '%-22s %10d %+10d\n' "all four" "$size" "$((size - base))"
