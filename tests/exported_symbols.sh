#!/bin/sh
# Every symbol the shared library exports carries the ABI prefix, and the
# hidden internals (infs__*) stay hidden.
lib=$1
syms=$(nm -D --defined-only "$lib" | awk '$2 ~ /^[TDBRVW]$/ { print $3 }')
[ -n "$syms" ] || { echo "no exported symbols found in $lib"; exit 1; }
bad=$(printf '%s\n' "$syms" | grep -v '^infs_' | grep -v '^_init$' | grep -v '^_fini$' | grep -v '^_edata$' | grep -v '^_end$' | grep -v '^__bss_start$')
internal=$(printf '%s\n' "$syms" | grep '^infs__')
if [ -n "$bad" ] || [ -n "$internal" ]; then
	echo "unexpected exported symbols:"
	printf '%s\n' $bad $internal
	exit 1
fi
printf '%s\n' "$syms" | grep -q '^infs_version_number$' || { echo "infs_version_number is not exported"; exit 1; }
echo "$(printf '%s\n' "$syms" | wc -l) exported symbols, all infs_*"
