"""Device presets (TOML). Installed as ``eyeblink.pipelines`` so ``--pipeline NAME`` finds them."""
