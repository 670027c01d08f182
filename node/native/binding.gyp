{
  "targets": [
    {
      "target_name": "vpc_lease_netns",
      "sources": ["netns.c"],
      "cflags": ["-O2", "-Wall", "-Wextra"]
    }
  ]
}
