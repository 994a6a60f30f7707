extension SQLCipherKitCommand {
    /// The options whose value is a number: a negative one (`--lock-timeout -1`) looks like an option to the parser,
    /// which then reports "Missing value for '--lock-timeout'", not the real cause.
    static let numericOptions: Set<String> = [
        "--lock-timeout", "--page-size", "--kdf-iterations", "--plaintext-header-size", "--fast-kdf-iterations",
        "--cipher-compatibility", "--retain-snapshots", "--index",
    ]

    /// `--lock-timeout -1` as `--lock-timeout=-1`, so that the option's own range check names the mistake
    /// ("--lock-timeout must be a number of seconds from 0 to 86400"). Only a negative number right after a numeric
    /// option is joined; nothing after `--` is touched.
    static func joiningNegativeNumbers(_ arguments: [String]) -> [String] {
        var result: [String] = []
        var index = arguments.startIndex
        while index < arguments.endIndex {
            let argument = arguments[index]
            if argument == "--" {
                result += arguments[index...]
                break
            }
            let next = index + 1 < arguments.endIndex ? arguments[index + 1] : nil
            if numericOptions.contains(argument), let next, next.hasPrefix("-"), Double(next) != nil {
                result.append(argument + "=" + next)
                index += 2
            } else {
                result.append(argument)
                index += 1
            }
        }
        return result
    }
}
