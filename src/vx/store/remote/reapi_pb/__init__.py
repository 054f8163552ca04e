"""Generated REAPI v2 stubs (dev/gen_reapi_stubs.sh); do not edit."""
