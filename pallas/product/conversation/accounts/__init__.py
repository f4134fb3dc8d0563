"""Several QQ accounts in one process: one voice per group (docs/accounts.md)."""
