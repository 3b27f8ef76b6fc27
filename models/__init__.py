"""The neural parts: encoders, selectors and the composed select-then-predict model."""
