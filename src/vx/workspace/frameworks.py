"""The JS frameworks turbo recognises in a package, and the variables each bakes into a build.

Next.js inlines `NEXT_PUBLIC_*` into the bundle at build time, Vite `VITE_*`, and so on: turbo
detects the framework from a package's dependencies and keys and passes those variables without
their being declared (its "framework inference"). vx does the same for a Turborepo repository run
as it is, with turbo 2's table — same order, first match wins, same detection rule — and
names the framework in a hint for vx's own configs, which declare variables by exact name.

Stdlib only, and no work for a package that names none of the detection dependencies.
"""

from __future__ import annotations

from typing import Iterable, Mapping

# (slug, detection: "all" | "some", dependencies, env wildcards, conditionals) in turbo's order
# (turbo 2.11's frameworks.json). A conditional (key, value, names) adds `names` when the host's
# `key` holds `value`.
TABLE: tuple[tuple[str, str, tuple[str, ...], tuple[str, ...], tuple[tuple[str, str, tuple[str, ...]], ...]], ...] = (
    ("astro", "all", ("astro",), ("PUBLIC_*",), ()),
    ("blitzjs", "all", ("blitz",), ("NEXT_PUBLIC_*",), ()),
    ("create-react-app", "some", ("react-scripts", "react-dev-utils"), ("REACT_APP_*",), ()),
    ("expo", "all", ("expo",), ("EXPO_PUBLIC_*",), ()),
    ("gatsby", "all", ("gatsby",), ("GATSBY_*",), ()),
    ("nextjs", "all", ("next",), ("NEXT_PUBLIC_*", "NEXT_DEPLOYMENT_ID"),
     (("VERCEL_SKEW_PROTECTION_ENABLED", "1", ("VERCEL_DEPLOYMENT_ID",)),)),
    ("nitro", "some", ("nitropack", "nitropack-nightly", "nitro", "nitro-nightly"),
     ("NITRO_*", "SERVER_*", "AWS_APP_ID", "INPUT_AZURE_STATIC_WEB_APPS_API_TOKEN", "CLEAVR", "CF_PAGES",
      "FIREBASE_APP_HOSTING", "NETLIFY", "STORMKIT", "NOW_BUILDER", "ZEABUR", "RENDER"), ()),
    ("nuxtjs", "some", ("nuxt", "nuxt-edge", "nuxt3", "nuxt3-edge"),
     ("NUXT_*", "NUXT_ENV_*", "NITRO_*", "SERVER_*", "AWS_APP_ID", "INPUT_AZURE_STATIC_WEB_APPS_API_TOKEN",
      "CLEAVR", "CF_PAGES", "FIREBASE_APP_HOSTING", "NETLIFY", "STORMKIT", "NOW_BUILDER", "ZEABUR", "RENDER",
      "LAUNCH_EDITOR"), ()),
    ("redwoodjs", "all", ("@redwoodjs/core",), ("REDWOOD_ENV_*",), ()),
    ("remix", "some", ("@remix-run/dev", "@remix-run/react", "@remix-run/serve"), ("REMIX_*",), ()),
    ("sanity", "all", ("@sanity/cli",), ("SANITY_STUDIO_*",), ()),
    ("solidstart", "all", ("solid-js", "solid-start"), ("VITE_*",), ()),
    ("sveltekit", "all", ("@sveltejs/kit",), ("VITE_*", "PUBLIC_*"), ()),
    ("vite", "all", ("vite",), ("VITE_*",), ()),
    ("vue", "all", ("@vue/cli-service",), ("VUE_APP_*", "LAUNCH_EDITOR"), ()),
)  # fmt: skip
_BY_SLUG = {row[0]: row for row in TABLE}
_DETECTING = frozenset(dep for row in TABLE for dep in row[2])
DEP_FIELDS = ("dependencies", "devDependencies", "optionalDependencies")
VENDOR_KEY = (
    "TURBO_CI_VENDOR_ENV_KEY"  # a CI vendor's own prefix (Vercel's NEXT_PUBLIC_VERCEL_), left out
)


def detect(manifest: Mapping, workspace_names: Iterable[str] | Mapping = ()) -> str:
    """The slug of the first framework whose dependencies the package names ("" for none).

    As turbo does in a monorepo: the package's external dependencies (dependencies, devDependencies,
    optionalDependencies; a workspace package of the same name does not count)."""
    named: set[str] = set()
    for field in DEP_FIELDS:
        deps = manifest.get(field)
        if isinstance(deps, dict):
            named.update(name for name in deps if name in _DETECTING)
    if not named:
        return ""
    named.difference_update(name for name in list(named) if name in workspace_names)
    for slug, strategy, deps, _wildcards, _conditionals in TABLE:
        if (all if strategy == "all" else any)(dep in named for dep in deps):
            return slug
    return ""


def env_patterns(slug: str, host: Mapping[str, str]) -> tuple[str, ...]:
    """The variable names and `*` patterns framework `slug` reads at build time, for this host,
    with the CI vendor's own prefix taken back (`!PREFIX*`) when `TURBO_CI_VENDOR_ENV_KEY` names one."""
    row = _BY_SLUG.get(slug)
    if row is None:
        return ()
    names = list(row[3])
    for key, value, extra in row[4]:
        if host.get(key) == value:
            names += extra
    vendor = host.get(VENDOR_KEY)
    if vendor:
        names.append(f"!{vendor}*")
    return tuple(names)


def prefixes(slug: str) -> tuple[str, ...]:
    """The wildcard patterns of `slug` as written (`NEXT_PUBLIC_*`), for hints and docs."""
    row = _BY_SLUG.get(slug)
    return tuple(p for p in row[3] if p.endswith("*")) if row else ()


def unseen(slug: str, env: Mapping[str, str], host: Mapping[str, str]) -> str:
    """The hint for a vx-config task whose framework bakes in variables the host sets but the
    task was not given ("" when there are none). Run on a miss only: it reads the whole host env."""
    patterns = prefixes(slug)
    names = sorted(n for n in host if n not in env and any(n.startswith(p[:-1]) for p in patterns))
    if not names:
        return ""
    shown = ", ".join(names[:3]) + (f" and {len(names) - 3} more" if len(names) > 3 else "")
    return (
        f"{shown} set but not given to the task: {slug} builds {'/'.join(patterns)} in; to use "
        f"{'it' if len(names) == 1 else 'them'}, list {'it' if len(names) == 1 else 'each'} in "
        f"exec.env.passThrough and cache.inputs.env"
    )
