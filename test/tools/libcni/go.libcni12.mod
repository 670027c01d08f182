module vpc-lease.test/libcni-driver

go 1.22

require github.com/containernetworking/cni v1.3.0
