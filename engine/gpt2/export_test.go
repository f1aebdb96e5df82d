package gpt2

// Test-only exports for the external gpt2_test package (which may import optim).
type Fixture = fixture

var LoadFixture = loadFixture
