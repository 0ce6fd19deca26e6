module github.com/inferscale/inferscale/bindings/go

go 1.21
