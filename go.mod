module github.com/rookscript/rookscript

go 1.26

require (
	github.com/BurntSushi/toml v1.6.0 // indirect
	github.com/dlclark/regexp2 v1.10.0 // indirect
	github.com/dustin/go-humanize v1.1.0 // indirect
	github.com/google/uuid v1.3.0 // indirect
	github.com/mattn/go-runewidth v0.0.3 // indirect
	github.com/notnil/chess v1.10.0 // indirect
	github.com/peterh/liner v1.2.2 // indirect
	github.com/pkoukk/tiktoken-go v0.1.8 // indirect
	github.com/yuin/gopher-lua v1.1.2 // indirect
	golang.org/x/sys v0.0.0-20211117180635-dee7805ff2e1 // indirect
)
