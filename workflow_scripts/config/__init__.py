"""Config validation: the whole config checked before any job runs (the schema in config/config.schema.yaml, then
the rules across keys and stages). It sits above every stage, since it asks each stage's own checks."""
