"""The built-in scenarios (``blocklab scenario list``): one TOML file per published study."""
