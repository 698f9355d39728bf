#!/usr/bin/env python3
"""The least padding any layout can reach for one layerwise buffer, by exhaustive search.

For the study in docs/PACKING.md: over every way to cut the buffer's params (backprop
order) into at most K contiguous buckets, and every packing of each bucket into dp shards
of one size (each param whole in one shard), the smallest total size. Exact, and slow
beyond a few distinct param sizes. Ignores alignment (the shapes studied are multiples of
2^20 elements).

Usage: bench/exact_packing.py MANIFEST DP K   (the manifest's layerwise params: matrices
not marked embedding_or_output)
"""
import functools
import json
import sys
from collections import Counter


def layerwise_sizes(manifest):
    params = json.load(open(manifest))["params"]
    sizes = []
    for p in params:
        if len(p["shape"]) == 2 and not p.get("embedding_or_output"):
            sizes.append(p["shape"][0] * p["shape"][1])
    return sizes[::-1]  # backprop order


def packs(kinds, counts, dp, capacity):
    """Whether items of `kinds` (sizes, decreasing) x `counts` fit in dp bins of `capacity`."""
    slack = dp * capacity - sum(k * c for k, c in zip(kinds, counts))
    if slack < 0 or kinds[0] > capacity:
        return False

    @functools.lru_cache(maxsize=None)
    def fits(left, bins, slack):
        if not any(left):
            return True
        if bins == 0:
            return False
        first = next(i for i, c in enumerate(left) if c)
        # Every filling of one bin holding an item of the largest size left, wasting <= slack.
        take = [0] * len(kinds)
        take[first] = 1

        def fillings(i, room):
            if i == len(kinds):
                if room <= slack:
                    yield tuple(take)
                return
            most = min(left[i] - take[i], room // kinds[i])
            for k in range(most, -1, -1):
                take[i] += k
                yield from fillings(i + 1, room - k * kinds[i])
                take[i] -= k

        for t in fillings(first, capacity - kinds[first]):
            waste = capacity - sum(k * c for k, c in zip(kinds, t))
            rest = tuple(c - x for c, x in zip(left, t))
            if fits(rest, bins - 1, slack - waste):
                return True
        return False

    return fits(tuple(counts), dp, slack)


def least_capacity(items, dp):
    c = Counter(items)
    kinds = sorted(c, reverse=True)
    counts = [c[k] for k in kinds]
    # The answer is what some bin holds: a sum of the sizes. Walk those sums upwards.
    low = max(kinds[0], -(-sum(items) // dp))
    sums = {0}
    for k, n in zip(kinds, counts):
        sums = {s + k * m for s in sums for m in range(n + 1) if s + k * m <= 2 * low}
    for capacity in sorted(s for s in sums if s >= low):
        if packs(kinds, counts, dp, capacity):
            return capacity
    return None


def main():
    manifest, dp, most = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    items = layerwise_sizes(manifest)
    total = sum(items)
    n = len(items)
    least = functools.lru_cache(maxsize=None)(lambda i, j: least_capacity(tuple(items[i:j]), dp))
    inf = float("inf")
    best = [[inf] * (n + 1) for _ in range(most + 1)]
    cut = {}
    best[0][0] = 0
    for k in range(1, most + 1):
        for j in range(1, n + 1):
            for i in range(j):
                if best[k - 1][i] < inf:
                    c = least(i, j)
                    if c is not None and best[k - 1][i] + dp * c < best[k][j]:
                        best[k][j] = best[k - 1][i] + dp * c
                        cut[k, j] = i
        if best[k][n] < inf:
            buckets, j = [], n
            for kk in range(k, 0, -1):
                buckets.append((cut[kk, j], j))
                j = cut[kk, j]
            print(f"{k} bucket(s): padding {100 * (best[k][n] - total) / total:.2f}% of the "
                  f"buffer's {n} params, buckets {buckets[::-1]}", flush=True)


if __name__ == "__main__":
    main()
