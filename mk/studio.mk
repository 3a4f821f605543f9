# Studio connection: the cost of a serverless instance's first parameters lookup.
.PHONY: bench-studio

bench-studio: ## first-need parameters lookup (agent lookup + RSA-OAEP/AES decryption) vs a loopback GET floor, cached reads
	go test -run '^$$' -bench 'LoopbackGET|Parameters|Decrypt|ParsePrivateKey' -benchmem -count 6 ./core/studio/ | tee bench-studio.txt
