module github.com/inferscale/inferscale/examples/inferscale-service

go 1.22

require github.com/inferscale/inferscale/bindings/go v0.0.0

replace github.com/inferscale/inferscale/bindings/go => ../../bindings/go
