"""turbo's framework table (TL-05): detection order and rule, the variables each bakes in."""

import pytest

from vx.plan.environment import inferred, keyed
from vx.workspace import frameworks


@pytest.mark.feature("TL-05")
def test_the_first_framework_in_turbos_order_wins():
    assert frameworks.detect({"dependencies": {"blitz": "1", "next": "1"}}) == "blitzjs"
    assert frameworks.detect({"devDependencies": {"next": "1"}}) == "nextjs"
    assert frameworks.detect({"dependencies": {"@sveltejs/kit": "1", "vite": "1"}}) == "sveltekit"


@pytest.mark.feature("TL-05")
def test_all_needs_every_dependency_and_some_any():
    assert frameworks.detect({"dependencies": {"solid-js": "1"}}) == ""
    assert (
        frameworks.detect({"dependencies": {"solid-js": "1", "solid-start": "1"}}) == "solidstart"
    )
    assert frameworks.detect({"optionalDependencies": {"nuxt3": "1"}}) == "nuxtjs"
    assert frameworks.detect({"dependencies": {"react-dev-utils": "1"}}) == "create-react-app"


@pytest.mark.feature("TL-05")
def test_a_workspace_package_of_that_name_and_peer_dependencies_do_not_count():
    assert frameworks.detect({"dependencies": {"next": "workspace:*"}}, {"next": object()}) == ""
    assert frameworks.detect({"peerDependencies": {"next": "1"}}) == ""
    assert frameworks.detect({"dependencies": "not a map"}) == ""


@pytest.mark.feature("TL-05")
def test_conditionals_and_the_ci_vendor_prefix():
    assert "VERCEL_DEPLOYMENT_ID" not in frameworks.env_patterns("nextjs", {})
    assert "VERCEL_DEPLOYMENT_ID" in frameworks.env_patterns(
        "nextjs", {"VERCEL_SKEW_PROTECTION_ENABLED": "1"}
    )
    host = {
        "TURBO_CI_VENDOR_ENV_KEY": "NEXT_PUBLIC_VERCEL_",
        "NEXT_PUBLIC_VERCEL_URL": "u",
        "NEXT_PUBLIC_A": "a",
        "NEXT_PUBLIC_B": "b",
        "VITE_X": "x",
    }
    assert inferred("nextjs", (), host) == ("NEXT_PUBLIC_A", "NEXT_PUBLIC_B")
    assert inferred("nextjs", ("API", "!NEXT_PUBLIC_B"), host) == ("NEXT_PUBLIC_A",)
    assert inferred("vite", (), host) == ("VITE_X",)


@pytest.mark.feature("KEY-07")
def test_keyed_folds_declared_then_inferred_then_what_reaches_the_task():
    host = {
        "API": "1",
        "NEXT_PUBLIC_A": "a",
        "NODE_OPTIONS": "--max-old-space-size=4096 --conditions=dev",
    }
    env = {
        "NODE_OPTIONS": host["NODE_OPTIONS"],
        "LANG": "C.UTF-8",
        "PATH": "/bin",
        "NODE_ENV": "production",
    }
    assert keyed(("API", "GONE"), ("NEXT_PUBLIC_A",), env, host) == (
        ("API", "1"),
        ("GONE", None),
        ("NEXT_PUBLIC_A", "a"),
        ("NODE_ENV", "production"),
        ("NODE_OPTIONS", "--conditions=dev"),
        ("LANG", "C.UTF-8"),
    )
    assert keyed(("NODE_ENV",), (), {"NODE_ENV": "test"}, {"NODE_ENV": "test"}) == (
        ("NODE_ENV", "test"),
    )  # once


@pytest.mark.feature("KEY-07")
def test_a_heap_size_alone_folds_as_an_empty_node_options():
    assert keyed((), (), {"NODE_OPTIONS": "--max-old-space-size=8192"}, {}) == (
        ("NODE_OPTIONS", ""),
    )
