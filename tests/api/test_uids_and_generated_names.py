"""``api.uids``: uids are version-4 UUIDs and generated names are Kubernetes' shape — the prefix
(cut to 58 characters) and five characters of ``utilrand``'s alphabet — across many refills of
the shared block of random bytes."""

from __future__ import annotations

import uuid

from api.uids import (
    MAX_GENERATED_PREFIX,
    NAME_SUFFIX_ALPHABET,
    NAME_SUFFIX_LENGTH,
    POOL_BYTES,
    generate_name,
    new_uid,
)


def test_uids_are_distinct_version_4_uuids() -> None:
    uids = [new_uid() for _ in range(3 * POOL_BYTES // 16)]
    assert len(set(uids)) == len(uids)
    for uid in uids:
        parsed = uuid.UUID(uid)
        assert str(parsed) == uid
        assert (parsed.version, parsed.variant) == (4, uuid.RFC_4122)


def test_generated_names_take_a_suffix_of_kubernetes_alphabet() -> None:
    assert NAME_SUFFIX_ALPHABET == "bcdfghjklmnpqrstvwxz2456789"
    suffixes = [generate_name("web-").removeprefix("web-") for _ in range(POOL_BYTES)]
    assert all(len(s) == NAME_SUFFIX_LENGTH for s in suffixes)
    drawn = set("".join(suffixes))
    assert drawn == set(NAME_SUFFIX_ALPHABET)  # 20,480 draws: every character turns up


def test_a_long_prefix_is_cut_so_the_name_fits_a_dns_label() -> None:
    name = generate_name("x" * 70)
    assert len(name) == 63
    assert name[:MAX_GENERATED_PREFIX] == "x" * 58
